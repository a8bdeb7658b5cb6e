package engines

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/fixture"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/testbin"
	cri "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The simulated Rancher Desktop, as faithful as what its source shows
// (rancher-sandbox/rancher-desktop, pkg/rancher-desktop/backend/wsl.ts):
// the rancher-desktop distro is an Alpine root (busybox, musl, no glibc;
// here made from Debian's busybox-static and musl, hack/engines/root.sh
// rancher-alpine) under a layer of the distro's version; /var/lib and
// /etc/rancher are kept in a data distro (binds of the test's dirs here);
// everything else of the root is a tmpfs upper layer, gone at every start.
// At every start, before the engine, Rancher Desktop writes containerd's
// config, links /etc/local.d to %LOCALAPPDATA%\rancher-desktop\provisioning
// (reached through /mnt/c), makes its *.start files executable and starts
// OpenRC's "local" service, which runs each as root; then it starts
// containerd (socket /run/k3s/containerd/containerd.sock) or moby. Its
// engines are static builds: containerd 2.4, runc 1.5 (static) and the
// Docker 29 daemon from their Go modules.
//
// What it cannot follow: Windows (/mnt/c is a plain dir), WSL's init and
// OpenRC itself (a shell loop runs the scripts as OpenRC's local does),
// k3s, nerdctl and buildkitd (nerdctl's module is refused by the proxy
// here: ctr stands in), the network namespace Rancher Desktop's
// network-setup makes, and a restart that keeps the distro's root (here
// every start begins from a clean root, the stricter case).
type rancherSim struct {
	m       *matrix
	host    string // the simulated host tree, a private copy
	folders string // dxgsim --folder-file: a driver update while running
	win     string // %LOCALAPPDATA%\rancher-desktop, at winInside
	varLib  string // the data distro's /var/lib
	etcRan  string // the data distro's /etc/rancher
	distro  string // the distro's version layer, over the rancher-alpine root
	alpine  string
	share   string // shown at the same path inside: image archives
	sockDir string // moby's socket, at /run/rd-sock inside
	engine  string // containerd or moby
	engineUser
	d      *daemon
	starts int
	// top is the test that made the sim: the distro's scratch dirs are
	// removed when it ends, not when the subtest that restarted it does
	// (the running distro still uses them).
	top *testing.T
}

const winInside = "/mnt/c/Users/wsl/AppData/Local/rancher-desktop"

// rdStart is what Rancher Desktop does in the distro at every start
// before the engine (wsl.ts: writeContainerdConfig, runProvisioningScripts,
// startService), then the engine itself. OpenRC's local service runs each
// executable /etc/local.d/*.start in lexical order, as root, with a clean
// environment.
const rdStart = `set -e
mkdir -p /etc/containerd /run/k3s/containerd
cp /usr/share/rancher-desktop/containerd-config.toml /etc/containerd/config.toml
mkdir -p ` + winInside + `/provisioning
rm -rf /etc/local.d
ln -s ` + winInside + `/provisioning /etc/local.d
find /etc/local.d/ '(' -name '*.start' -o -name '*.stop' ')' -exec chmod a+x '{}' ';'
for f in /etc/local.d/*.start; do
	[ -x "$f" ] || continue
	echo "local: executing $f"
	env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$f" 2>&1 || echo "local: $f exited $?"
done
case $RD_ENGINE in
containerd) exec containerd --config /etc/containerd/config.toml ;;
moby) exec dockerd -H unix:///run/rd-sock/docker.sock --iptables=false --ip6tables=false --bridge=none --storage-driver=vfs ;;
esac
echo "no engine $RD_ENGINE" >&2
exit 1
`

// newRancher lays out a simulated Rancher Desktop (distro version
// version) on a host of profile; start boots it.
func newRancher(t *testing.T, m *matrix, userBin string) *rancherSim {
	t.Helper()
	dir := shortTemp(t, "wgrd-")
	os.Chmod(dir, 0o755)
	out, err := exec.Command("../../hack/engines/root.sh", "rancher-alpine").Output()
	if err != nil {
		t.Fatalf("hack/engines/root.sh rancher-alpine: %v\n%s", err, stderrOf(err))
	}
	s := &rancherSim{m: m, alpine: strings.TrimSpace(string(out)),
		win: filepath.Join(dir, "win"), varLib: filepath.Join(dir, "var-lib"), etcRan: filepath.Join(dir, "etc-rancher"),
		share: filepath.Join(dir, "share"), sockDir: filepath.Join(dir, "sock"), engine: "containerd", top: t,
		folders: filepath.Join(dir, "folders")}
	s.host = fixture.Host(t, profile, fixture.Options{})
	if err := os.WriteFile(s.folders, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{filepath.Join(s.win, "provisioning"), s.varLib, s.etcRan, s.share, s.sockDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	s.upgrade(t, "0.100")
	config := filepath.Join(dir, "user-config")
	if err := os.MkdirAll(config, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(config, 0o777)
	s.engineUser = engineUser{"PATH=" + userBin + ":/usr/bin:/bin", "DOCKER_HOST=unix://" + filepath.Join(s.sockDir, "docker.sock"),
		"DOCKER_CONFIG=" + config, "HOME=" + config}
	return s
}

// upgrade replaces the distro's own files with version's, as a Rancher
// Desktop upgrade re-imports the distro: only /var/lib and /etc/rancher
// (the data distro) stay. Takes effect at the next start.
func (s *rancherSim) upgrade(t *testing.T, version string) {
	t.Helper()
	layer := filepath.Join(filepath.Dir(s.win), "distro-"+version)
	if err := os.MkdirAll(filepath.Join(layer, "usr/share/rancher-desktop"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile("testdata/rancher-containerd.toml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(layer, "usr/share/rancher-desktop/containerd-config.toml"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(layer, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(layer, "etc/rancher-desktop-distro"), []byte(version+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The distro's build replaces Alpine's os-release with its own
	// (rancher-desktop-wsl-distro: files/os-release, rendered by
	// files/build.sh with every value quoted); moby's `docker info` shows
	// its PRETTY_NAME as the OperatingSystem, and doctor knows the distro
	// by it.
	osRelease := `NAME="Rancher Desktop WSL Distro"
ID="rancher-desktop-wsl-distro"
PRETTY_NAME="Rancher Desktop WSL Distribution"
VERSION_ID="` + version + `"
HOME_URL="https://rancherdesktop.io/"
`
	if err := os.WriteFile(filepath.Join(layer, "etc/os-release"), []byte(osRelease), 0o644); err != nil {
		t.Fatal(err)
	}
	s.distro = layer
}

// start boots the distro: a clean root, the kept data, the provisioning
// scripts, the engine.
func (s *rancherSim) start(t *testing.T) {
	t.Helper()
	s.starts++
	scratch := shortTemp(s.top, "wgrd-root-")
	pivot := []string{s.m.pivot, "--root", s.distro + ":" + s.alpine, "--scratch", scratch, "--tmpfs-upper", "--private-tmp",
		"--bind", filepath.Join(engineCache(), "engines"),
		"--bind", s.varLib + ":/var/lib", "--bind", s.etcRan + ":/etc/rancher", "--bind", s.win + ":" + winInside,
		"--bind", s.share, "--bind", s.sockDir + ":/run/rd-sock", "--",
		"sh", "-c", rdStart}
	path := []string{s.m.engine(t, "containerd"), s.m.engine(t, "runc-static"), s.m.engine(t, "dockerd"), "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	d := &daemon{report: filepath.Join(t.TempDir(), "dxgsim.json")}
	d.cmd = exec.Command(s.m.e.sim, append([]string{"--profile", profile, "--bind-host", s.host, "--folder-file", s.folders, "--report", d.report, "--"}, pivot...)...)
	d.cmd.Env = []string{"PATH=" + strings.Join(path, ":"), "HOME=/root", "RD_ENGINE=" + s.engine}
	d.cmd.Stdout, d.cmd.Stderr = &d.stderr, &d.stderr
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s.d = d
	begun := time.Now()
	deadline := begun.Add(3 * time.Minute)
	for {
		var out string
		var err error
		if s.engine == "moby" {
			os.Chmod(filepath.Join(s.sockDir, "docker.sock"), 0o666)
			out, err = s.docker(t, "version", "--format", "{{.Server.Version}}")
		} else {
			out, err = s.ctr(t, "version")
		}
		if err == nil {
			t.Logf("Rancher Desktop start %d (%s): up in %.1fs", s.starts, s.engine, time.Since(begun).Seconds())
			return
		}
		if time.Now().After(deadline) || d.cmd.ProcessState != nil {
			s.stop(t)
			t.Fatalf("the simulated Rancher Desktop (%s) did not come up: %v %s\n%s", s.engine, err, out, tail(d.stderr.String(), 30))
		}
		time.Sleep(300 * time.Millisecond)
	}
}

func (s *rancherSim) stop(t *testing.T) {
	t.Helper()
	if s.d != nil {
		begun := time.Now()
		s.d.stop(t)
		s.d = nil
		t.Logf("Rancher Desktop (%s) stopped in %.1fs", s.engine, time.Since(begun).Seconds())
	}
}

func (s *rancherSim) restart(t *testing.T) {
	t.Helper()
	s.stop(t)
	s.start(t)
}

// sh runs a shell line in the distro, as root (`rdctl shell sudo ...`).
func (s *rancherSim) sh(t *testing.T, script string) (string, error) {
	t.Helper()
	return s.d.exec(t, "", "/bin/sh", "-c", script)
}

// ctr runs containerd's ctr in the distro against Rancher Desktop's
// socket, in nerdctl's namespace.
func (s *rancherSim) ctr(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctr := filepath.Join(s.m.engine(t, "containerd"), "ctr")
	return s.d.exec(t, "", append([]string{ctr, "--address", "/run/k3s/containerd/containerd.sock", "--namespace", "default"}, args...)...)
}

// gpu runs the GPU check in a container of the running engine with the
// engine's own flag for a CDI device.
func (s *rancherSim) gpu(t *testing.T, dev string) (string, error) {
	t.Helper()
	if s.engine == "moby" {
		return s.docker(t, "run", "--rm", "--network", "none", "--device", dev, "wslgpu-test", "sh", "-c", inside)
	}
	return s.ctr(t, "run", "--rm", "--device", dev, "docker.io/library/wslgpu-test:latest", fmt.Sprintf("gpu-%d", time.Now().UnixNano()), "sh", "-c", inside)
}

// TestRancherDesktop is Rancher Desktop's distro on a WSL host with an
// NVIDIA and an Intel GPU: before the provisioning script, --device fails;
// with it (and the release folder beside it), containerd's and moby's
// GPU containers get their GPU; a restart, a switch of engine and a distro
// upgrade need no user step; removal leaves nothing.
func TestRancherDesktop(t *testing.T) {
	m := setupMatrix(t)
	e := m.e
	mountsBefore := hostWSLMounts(t)
	s := newRancher(t, m, rancherUserBin(t))

	t.Run("the distro: musl and busybox, no glibc; every engine static", func(t *testing.T) {
		var libc []string
		filepath.Walk(s.alpine, func(p string, fi os.FileInfo, err error) error {
			if err == nil && fi.Name() == "libc.so.6" {
				libc = append(libc, p)
			}
			return nil
		})
		if len(libc) > 0 {
			t.Errorf("glibc in the Alpine-like root: %v", libc)
		}
		if _, err := os.Stat(filepath.Join(s.alpine, "lib/ld-musl-x86_64.so.1")); err != nil {
			t.Errorf("no musl loader: %v", err)
		}
		bins := []string{filepath.Join(s.m.engine(t, "runc-static"), "runc"), filepath.Join(s.m.engine(t, "dockerd"), "dockerd")}
		for _, b := range []string{"containerd", "containerd-shim-runc-v2", "ctr"} {
			bins = append(bins, filepath.Join(s.m.engine(t, "containerd"), b))
		}
		for _, b := range bins {
			if err := testbin.CheckStatic(b); err != nil {
				t.Error(err)
			}
		}
	})

	s.start(t)
	defer func() { s.stop(t) }()
	archive := filepath.Join(s.share, "image.tar")
	if err := dockerArchive(e.rootfs, "docker.io/library/wslgpu-test:latest", []string{"/bin/sleep", "3600"}, archive); err != nil {
		t.Fatal(err)
	}
	if out, err := s.ctr(t, "images", "import", archive); err != nil {
		t.Fatalf("ctr images import: %v\n%s", err, out)
	}
	if out, err := s.sh(t, "cat /etc/os-release /etc/rancher-desktop-distro; ls /lib"); err != nil || !strings.Contains(out, `ID="rancher-desktop-wsl-distro"`) || !strings.Contains(out, "ld-musl") {
		t.Fatalf("the running distro is not the Alpine-like one: %v\n%s", err, out)
	}

	t.Run("before the script: unresolvable CDI devices", func(t *testing.T) {
		out, err := s.gpu(t, "nvidia.com/gpu=all")
		if err == nil || !strings.Contains(out, unresolvable) {
			t.Fatalf("ctr run --device nvidia.com/gpu=all before the script: %v\n%s", err, out)
		}
		t.Logf("before the script: %s", grepLines(out, unresolvable))
	})

	// What the user does on Windows: the script and the release's folder
	// (the tarball unpacked) into the provisioning folder; then restart
	// Rancher Desktop.
	script, err := os.ReadFile("../../packaging/rancher-desktop/wsl-gpu-hook.start")
	if err != nil {
		t.Fatal(err)
	}
	// Windows files need not be executable: Rancher Desktop chmods them.
	if err := os.WriteFile(filepath.Join(s.win, "provisioning", "wsl-gpu-hook.start"), script, 0o644); err != nil {
		t.Fatal(err)
	}

	t.Run("the script without the release folder: the engine starts, one line says why", func(t *testing.T) {
		s.restart(t)
		out, err := s.sh(t, "cat /var/lib/wsl-gpu-hook/last-start.log")
		want := "no wsl-gpu-hook_<version>_linux_amd64 folder next to /etc/local.d/wsl-gpu-hook.start, and nothing in /var/lib/wsl-gpu-hook yet: unpack the release tarball into Rancher Desktop's provisioning folder"
		if err != nil || strings.Count(strings.TrimSpace(out), "\n") != 0 || !strings.HasSuffix(strings.TrimSpace(out), want) {
			t.Errorf("the script's log: %v\n%s\nwant one line ending %q", err, out, want)
		}
		if out, err := s.gpu(t, "nvidia.com/gpu=all"); err == nil || !strings.Contains(out, unresolvable) {
			t.Errorf("--device nvidia.com/gpu=all without the binaries: %v\n%s", err, out)
		}
	})

	release := unpackRelease(t, filepath.Join(s.win, "provisioning"), e.hook)
	s.restart(t)
	if out, err := s.ctr(t, "images", "ls", "-q"); err != nil || !strings.Contains(out, "wslgpu-test") {
		t.Fatalf("the image did not survive the restart (/var/lib): %v\n%s", err, out)
	}

	checkProvisioned := func(t *testing.T) {
		t.Helper()
		out, err := s.sh(t, "cat /var/lib/wsl-gpu-hook/last-start.log; ls /var/lib/wsl-gpu-hook/; grep -l /var/lib/wsl-gpu-hook/wsl-gpu-hook /var/run/cdi/*")
		if err != nil || !strings.Contains(out, "wsl-gpu-ctl") || !strings.Contains(out, "/var/run/cdi/") {
			t.Fatalf("after the script: %v\n%s", err, out)
		}
		t.Logf("start %d, the script's log, /var/lib/wsl-gpu-hook, our specs:\n%s", s.starts, out)
	}
	rows := []struct {
		dev     string
		folders []string
	}{
		{"nvidia.com/gpu=all", nvidiaOnly(e)},
		{"nvidia.com/gpu=0", nvidiaOnly(e)},
		{"wsl-gpu-hook.dev/gpu=intel", intelOnly(e)},
		{"wsl-gpu-hook.dev/gpu=all", allGPUs(e)},
	}
	gpuRows := func(t *testing.T, rows ...struct {
		dev     string
		folders []string
	}) {
		t.Helper()
		for _, r := range rows {
			begun := time.Now()
			out, err := s.gpu(t, r.dev)
			t.Logf("%s --device %s: %.1fs", s.engine, r.dev, time.Since(begun).Seconds())
			if err != nil {
				t.Fatalf("%s --device %s: %v\n%s\nstart log:\n%s", s.engine, r.dev, err, out, tail(s.d.stderr.String(), 20))
			}
			checkRow(t, e, out, r.folders)
		}
	}

	// doctor's Rancher Desktop line, in the distro (`rdctl shell sudo
	// /var/lib/wsl-gpu-hook/wsl-gpu-ctl doctor`) or, with moby, from the
	// user's distro through the docker CLI.
	doctorSays := func(t *testing.T, out, want string) {
		t.Helper()
		if line := grepLines(out, "rancher desktop:"); !strings.HasPrefix(line, want) {
			t.Errorf("doctor's Rancher Desktop line %q, want it to start %q:\n%s", line, want, out)
		}
	}

	t.Run("containerd: ctr run --device", func(t *testing.T) {
		checkProvisioned(t)
		gpuRows(t, rows...)
		out, _ := s.sh(t, "/var/lib/wsl-gpu-hook/wsl-gpu-ctl doctor")
		doctorSays(t, out, "ok    rancher desktop: its provisioning script /etc/local.d/wsl-gpu-hook.start wrote our CDI specs")
	})

	t.Run("restart: a clean root, no user step", func(t *testing.T) {
		if out, err := s.sh(t, "touch /etc/written-before-restart /usr/local/bin/written-before-restart"); err != nil {
			t.Fatalf("mark the root: %v\n%s", err, out)
		}
		s.restart(t)
		if out, _ := s.sh(t, "ls /etc/written-before-restart /usr/local/bin/written-before-restart 2>&1"); strings.Count(out, "No such file") != 2 {
			t.Fatalf("the distro's root was not reset by the restart:\n%s", out)
		}
		checkProvisioned(t)
		gpuRows(t, rows[0])
	})

	t.Run("moby: docker run --device", func(t *testing.T) {
		s.stop(t)
		s.engine = "moby"
		s.start(t)
		if out, err := s.as(t, m.e.imgTar, "docker", "import", "-", "wslgpu-test"); err != nil {
			t.Fatalf("docker import: %v\n%s", err, out)
		}
		checkProvisioned(t)
		gpuRows(t, rows...)
		// The user's docker CLI is Debian 13's (26.1): moby shows the CDI
		// devices it sees (DiscoveredDevices) only to a 28.2+ CLI, so
		// doctor knows the engine by its OperatingSystem and says it
		// cannot tell from there. (A newer CLI cannot be built here: the
		// docker/cli module needs a dependency the proxy refuses; pkg/setup/doctor's
		// TestRancherDesktop covers its answer.)
		out, _ := s.as(t, "", "wsl-gpu-ctl", "doctor")
		doctorSays(t, out, "warn  rancher desktop: cannot tell from here whether Rancher Desktop's containers get the GPU: the engine (moby 29.8.0) lists its CDI devices only to a docker CLI of 28.2 or later, and this one is 26.1.5+dfsg1")
	})

	t.Run("distro upgrade: a new root, /var/lib kept, no user step", func(t *testing.T) {
		// The release folder may be gone by now: the binaries are in /var/lib.
		if err := os.RemoveAll(filepath.Dir(release)); err != nil {
			t.Fatal(err)
		}
		s.stop(t)
		s.upgrade(t, "0.101")
		s.start(t)
		if out, err := s.sh(t, "cat /etc/rancher-desktop-distro"); err != nil || strings.TrimSpace(out) != "0.101" {
			t.Fatalf("the distro was not upgraded: %v %q", err, out)
		}
		checkProvisioned(t)
		gpuRows(t, rows[0], rows[2])
		s.stop(t)
		s.engine = "containerd"
		s.start(t)
		gpuRows(t, rows[0])
	})

	// After the driver update the NVIDIA folder has a new name (CUDA
	// still loads from it).
	updated := "nvltwi.inf_amd64_00c0ffee00c0ffee"
	afterUpdate := func(t *testing.T, dev string, folders ...string) {
		t.Helper()
		out, err := s.gpu(t, dev)
		if err != nil {
			t.Fatalf("%s --device %s after the driver update: %v\n%s", s.engine, dev, err, out)
		}
		checkGPU(t, out, true, folders...)
	}
	t.Run("Windows driver update while running: no user step", func(t *testing.T) {
		drivers := filepath.Join(s.host, fixture.DriversDir)
		if err := os.Rename(filepath.Join(drivers, e.nvidia), filepath.Join(drivers, updated)); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(s.folders, fmt.Appendf(nil, "1=%s\n", updated), 0o644); err != nil {
			t.Fatal(err)
		}
		afterUpdate(t, "nvidia.com/gpu=all", updated)
		afterUpdate(t, "wsl-gpu-hook.dev/gpu=all", e.intel, updated)
	})

	t.Run("a new wsl-gpu-hook release: unpack it, restart", func(t *testing.T) {
		prov := filepath.Join(s.win, "provisioning")
		// A hook whose bytes differ from the installed one's: the
		// installed copy must be replaced by it.
		newer, err := os.ReadFile(e.hook)
		if err != nil {
			t.Fatal(err)
		}
		newHook := filepath.Join(t.TempDir(), "wsl-gpu-hook")
		if err := os.WriteFile(newHook, append(newer, "wsl-gpu-hook-test-release-2"...), 0o755); err != nil {
			t.Fatal(err)
		}
		bin := unpackRelease(t, prov, newHook)
		s.restart(t)
		out, err := s.sh(t, "cmp /var/lib/wsl-gpu-hook/wsl-gpu-hook "+strings.Replace(bin, s.win, winInside, 1)+"/wsl-gpu-hook && echo same")
		if err != nil || !strings.Contains(out, "same") {
			t.Fatalf("the installed hook is not the new release's: %v\n%s", err, out)
		}
		afterUpdate(t, "nvidia.com/gpu=all", updated)
		if err := os.RemoveAll(filepath.Dir(bin)); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("removal leaves nothing", func(t *testing.T) {
		// In the distro (`rdctl shell sudo sh /etc/local.d/wsl-gpu-hook.start remove`),
		// then the files off the provisioning folder, then a restart.
		if out, err := s.sh(t, "sh /etc/local.d/wsl-gpu-hook.start remove"); err != nil {
			t.Fatalf("remove: %v\n%s", err, out)
		}
		if err := os.Remove(filepath.Join(s.win, "provisioning", "wsl-gpu-hook.start")); err != nil {
			t.Fatal(err)
		}
		s.restart(t)
		out, err := s.gpu(t, "nvidia.com/gpu=all")
		if err == nil || !strings.Contains(out, unresolvable) {
			t.Errorf("--device nvidia.com/gpu=all after removal: %v\n%s", err, out)
		}
		// Not looked into: the engines' storage. The hook writes an
		// ld.so.conf.d file into each GPU container's own root; a removed
		// container's layer stays on disk until containerd's garbage
		// collection, which is the engine's business, not ours.
		engineStorage := map[string]bool{filepath.Join(s.varLib, "rancher/k3s/agent/containerd"): true, filepath.Join(s.varLib, "docker"): true}
		var left []string
		for _, d := range []string{s.varLib, s.etcRan, filepath.Join(s.win, "provisioning")} {
			filepath.Walk(d, func(p string, fi os.FileInfo, err error) error {
				if err == nil && engineStorage[p] {
					return filepath.SkipDir
				}
				if err == nil && strings.Contains(fi.Name(), "wsl-gpu") {
					left = append(left, p)
				}
				return nil
			})
		}
		if len(left) > 0 {
			t.Errorf("left after removal: %v", left)
		}
		if out, _ := s.sh(t, "grep -rl wsl-gpu-hook /var/run/cdi /etc/cdi 2>/dev/null; true"); strings.TrimSpace(out) != "" {
			t.Errorf("specs left after removal:\n%s", out)
		}
	})
	s.stop(t)
	if after := hostWSLMounts(t); after != mountsBefore {
		t.Errorf("WSL mounts leaked into the host:\n%s", after)
	}
}

// rancherUserBin is the user's side: Debian 13's docker CLI, alone in a
// dir anybody can read (Rancher Desktop's docker CLI talks to moby's socket).
func rancherUserBin(t *testing.T) string {
	t.Helper()
	dir := shortTemp(t, "wgrd-user-")
	os.Chmod(dir, 0o755)
	cli, err := os.ReadFile(filepath.Join(engineCache(), "roots/trixie/usr/bin/docker"))
	if err != nil {
		t.Fatalf("Debian 13's docker CLI: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "docker"), cli, 0o755); err != nil {
		t.Fatal(err)
	}
	// wsl-gpu-ctl, as the user's distro has it from the package: doctor.
	if _, err := testbin.Build(dir, "wsl-gpu-ctl", "./cmd/wsl-gpu-ctl", true); err != nil {
		t.Fatal(err)
	}
	return dir
}

// unpackRelease makes a release tarball as hack/release.sh does (its tar
// tool, its names and modes; the binaries only) and unpacks it into dir as
// a user does on Windows, where the files keep no mode (0644 here). It
// returns the tarball's bin dir.
func unpackRelease(t *testing.T, dir, hook string) string {
	t.Helper()
	stage := t.TempDir()
	installRelease(t, stage, hook)
	name := "wsl-gpu-hook_0.0.0-test_linux_amd64"
	archive := filepath.Join(t.TempDir(), name+".tar.gz")
	cmd := exec.Command("go", "run", ".", "tar", "-out", archive, "-prefix", name+"/",
		filepath.Join(stage, "wsl-gpu-hook")+"=bin/wsl-gpu-hook:755", filepath.Join(stage, "wsl-gpu-ctl")+"=bin/wsl-gpu-ctl:755")
	cmd.Dir = "../../hack/release"
	cmd.Env = append(os.Environ(), "SOURCE_DATE_EPOCH=1700000000")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("hack/release tar: %v\n%s", err, out)
	}
	if out, err := exec.Command("tar", "-xzf", archive, "-C", dir, "--no-same-permissions", "--no-same-owner").CombinedOutput(); err != nil {
		t.Fatalf("tar -xzf: %v\n%s", err, out)
	}
	bin := filepath.Join(dir, name, "bin")
	for _, b := range []string{"wsl-gpu-hook", "wsl-gpu-ctl"} {
		if err := os.Chmod(filepath.Join(bin, b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return bin
}

// installRelease lays out the release tarball's folder as a user unpacks
// it beside the script: bin/wsl-gpu-hook and bin/wsl-gpu-ctl, static.
func installRelease(t *testing.T, bin, hook string) {
	t.Helper()
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	ctl, err := testbin.Build(t.TempDir(), "wsl-gpu-ctl", "./cmd/wsl-gpu-ctl", true)
	if err != nil {
		t.Fatal(err)
	}
	for name, src := range map[string]string{"wsl-gpu-hook": hook, "wsl-gpu-ctl": ctl} {
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		// The Windows side keeps no mode: 0644 as a copy from NTFS shows.
		if err := os.WriteFile(filepath.Join(bin, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := testbin.CheckStatic(filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}
}

// k3sNode is a WSL distro running k3s alone, as far as the node's
// containerd goes: k3s could not be built here (its module is refused by the
// proxy), so containerd 2.4 runs with a config of the shape k3s writes for
// containerd 2.x (testdata/rancher-k3s-containerd.toml) at k3s's paths, in
// a Debian 13 root whose changes are gone at every boot (the stricter case
// of /run being a tmpfs); /var/lib/rancher and /var/lib/wsl-gpu-hook (the
// chart's hostPath) are kept. The chart's node-setup init container runs as
// a privileged container of that containerd with the chart's mounts.
type k3sNode struct {
	m                        *matrix
	rancher, hookDir, runK3s string
	share                    string // shown at the same path inside: config, pod root, archives
	d                        *daemon
	top                      *testing.T
}

func newK3sNode(t *testing.T, m *matrix) *k3sNode {
	t.Helper()
	dir := shortTemp(t, "wgk3s-")
	os.Chmod(dir, 0o755)
	n := &k3sNode{m: m, rancher: filepath.Join(dir, "rancher"), hookDir: filepath.Join(dir, "hook"),
		runK3s: filepath.Join(dir, "run-k3s"), share: filepath.Join(dir, "share"), top: t}
	for _, d := range []string{n.rancher, n.hookDir, n.runK3s, n.share} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := os.ReadFile("testdata/rancher-k3s-containerd.toml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(n.share, "k3s-containerd.toml"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	return n
}

// boot starts the node: a clean root and /run, k3s's containerd config
// written again, containerd started as k3s starts it.
func (n *k3sNode) boot(t *testing.T) {
	t.Helper()
	// /run/k3s/containerd is bound from the host (the CRI socket is
	// reached from here): empty it as a boot empties /run.
	os.RemoveAll(n.runK3s)
	os.MkdirAll(n.runK3s, 0o755)
	scratch := shortTemp(n.top, "wgk3s-root-")
	boot := `set -e
mkdir -p /var/lib/rancher/k3s/agent/etc/containerd
cp "$1"/k3s-containerd.toml /var/lib/rancher/k3s/agent/etc/containerd/config.toml
exec containerd -c /var/lib/rancher/k3s/agent/etc/containerd/config.toml`
	pivot := []string{n.m.pivot, "--root", n.m.trixie, "--scratch", scratch, "--tmpfs-upper",
		"--bind", filepath.Join(engineCache(), "engines"), "--bind", n.share,
		"--bind", n.rancher + ":/var/lib/rancher", "--bind", n.hookDir + ":/var/lib/wsl-gpu-hook",
		"--bind", n.runK3s + ":/run/k3s/containerd", "--", "sh", "-c", boot, "sh", n.share}
	path := []string{n.m.engine(t, "containerd"), n.m.engine(t, "runc"), "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	d := &daemon{report: filepath.Join(t.TempDir(), "dxgsim.json")}
	d.cmd = exec.Command(n.m.e.sim, append([]string{"--profile", profile, "--bind-host", n.m.e.hostDir, "--report", d.report, "--"}, pivot...)...)
	d.cmd.Env = []string{"PATH=" + strings.Join(path, ":"), "HOME=/root"}
	d.cmd.Stdout, d.cmd.Stderr = &d.stderr, &d.stderr
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	n.d = d
	deadline := time.Now().Add(3 * time.Minute)
	for {
		out, err := n.ctr(t, "version")
		if err == nil {
			return
		}
		if time.Now().After(deadline) || d.cmd.ProcessState != nil {
			n.stop(t)
			t.Fatalf("the k3s node's containerd did not come up: %v %s\n%s", err, out, tail(d.stderr.String(), 30))
		}
		time.Sleep(300 * time.Millisecond)
	}
}

func (n *k3sNode) stop(t *testing.T) {
	t.Helper()
	if n.d != nil {
		n.d.stop(t)
		n.d = nil
	}
}

// ctr runs ctr on the node in the kubelet's namespace, k8s.io.
func (n *k3sNode) ctr(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctr := filepath.Join(n.m.engine(t, "containerd"), "ctr")
	return n.d.exec(t, "", append([]string{ctr, "--address", "/run/k3s/containerd/containerd.sock", "--namespace", "k8s.io"}, args...)...)
}

// nodeSetup runs the chart's init container on the node: the device
// plugin's image (its static binaries), privileged, with the chart's
// hostPath mounts under /host, `--node-root=/host --setup-only`.
func (n *k3sNode) nodeSetup(t *testing.T, podRoot string) (string, error) {
	t.Helper()
	if out, err := n.d.exec(t, "", "mkdir", "-p", "/var/run/cdi"); err != nil { // hostPath DirectoryOrCreate
		return out, err
	}
	return n.ctr(t, "run", "--rm", "--privileged", "--rootfs",
		"--mount", "type=bind,src=/var/lib/wsl-gpu-hook,dst=/host/var/lib/wsl-gpu-hook,options=rbind:rw",
		"--mount", "type=bind,src=/var/run/cdi,dst=/host/var/run/cdi,options=rbind:rw",
		"--mount", "type=bind,src=/usr/lib/wsl,dst=/usr/lib/wsl,options=rbind:ro",
		podRoot, fmt.Sprintf("node-setup-%d", time.Now().UnixNano()),
		"/usr/bin/wsl-gpu-device-plugin", "--node-root=/host", "--hook-dir=/var/lib/wsl-gpu-hook", "--cdi-dir=/var/run/cdi", "--setup-only")
}

// TestK3sNodeCDI: the specs the chart's node setup writes into
// /var/run/cdi are seen by k3s's containerd (its CRI reads that dir; ctr
// run --device resolves them), and after a reboot, which empties
// /var/run, the node setup writes them again before a GPU container runs.
func TestK3sNodeCDI(t *testing.T) {
	m := setupMatrix(t)
	e := m.e
	mountsBefore := hostWSLMounts(t)
	n := newK3sNode(t, m)
	podRoot := filepath.Join(n.share, "pod")
	for _, d := range []string{"usr/bin", "tmp", "etc", "proc", "sys", "dev"} {
		if err := os.MkdirAll(filepath.Join(podRoot, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.Chmod(filepath.Join(podRoot, "tmp"), 0o1777)
	plugin, err := testbin.Build(t.TempDir(), "wsl-gpu-device-plugin", "./cmd/wsl-gpu-device-plugin", true)
	if err != nil {
		t.Fatal(err)
	}
	installRelease(t, filepath.Join(podRoot, "usr/bin"), e.hook)
	if data, err := os.ReadFile(plugin); err != nil || os.WriteFile(filepath.Join(podRoot, "usr/bin/wsl-gpu-device-plugin"), data, 0o755) != nil {
		t.Fatalf("the plugin into the pod's root: %v", err)
	}
	for _, b := range []string{"wsl-gpu-hook", "wsl-gpu-ctl"} {
		os.Chmod(filepath.Join(podRoot, "usr/bin", b), 0o755)
	}

	n.boot(t)
	defer func() { n.stop(t) }()
	importImages(t, e, n.share, func(args ...string) (string, error) { return n.ctr(t, args...) })

	t.Run("CRI: CDI on, reading /var/run/cdi", func(t *testing.T) {
		rt, closeConn := criClient(t, filepath.Join(n.runK3s, "containerd.sock"))
		defer closeConn()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		st, err := rt.Status(ctx, &cri.StatusRequest{Verbose: true})
		if err != nil {
			t.Fatal(err)
		}
		// containerd 2.4 has CDI always on (it drops enable_cdi:
		// plugins/cri/runtime/plugin.go); its CRI reads cdiSpecDirs.
		var cfg struct {
			CDISpecDirs []string `json:"cdiSpecDirs"`
		}
		if err := json.Unmarshal([]byte(st.Info["config"]), &cfg); err != nil {
			t.Fatalf("CRI status config: %v\n%s", err, st.Info["config"])
		}
		if !slices.Contains(cfg.CDISpecDirs, "/var/run/cdi") {
			t.Fatalf("k3s's containerd's CRI reads CDI specs from %v, want /var/run/cdi among them", cfg.CDISpecDirs)
		}
		t.Logf("CRI: cdiSpecDirs %v", cfg.CDISpecDirs)
	})

	gpu := func(t *testing.T, dev string) (string, error) {
		t.Helper()
		return n.ctr(t, "run", "--rm", "--device", dev, "docker.io/library/wslgpu-test:latest", fmt.Sprintf("gpu-%d", time.Now().UnixNano()), "sh", "-c", inside)
	}
	for boot := 1; boot <= 2; boot++ {
		t.Run(fmt.Sprintf("boot %d: no spec until the node setup, then GPU containers", boot), func(t *testing.T) {
			if boot == 2 {
				n.stop(t)
				n.boot(t)
			}
			if out, err := gpu(t, "nvidia.com/gpu=all"); err == nil || !strings.Contains(out, unresolvable) {
				t.Fatalf("--device nvidia.com/gpu=all before the node setup: %v\n%s", err, out)
			}
			// What the kubelet sends for the device plugin's CDI answer.
			pod := criRow{name: "CRI pod, CDI nvidia.com/gpu=all", cdi: "nvidia.com/gpu=all", folders: nvidiaOnly}
			rt, closeConn := criClient(t, filepath.Join(n.runK3s, "containerd.sock"))
			defer closeConn()
			if out, err := criRun(t, rt, n.share, 10*boot, pod); err == nil || !strings.Contains(err.Error(), unresolvable) {
				t.Fatalf("a CRI pod with CDI device nvidia.com/gpu=all before the node setup: %v\n%s", err, out)
			}
			out, err := n.nodeSetup(t, podRoot)
			if err != nil {
				t.Fatalf("node setup: %v\n%s", err, out)
			}
			t.Logf("node setup:\n%s", out)
			for _, r := range []struct {
				dev     string
				folders []string
			}{{"nvidia.com/gpu=all", nvidiaOnly(e)}, {"wsl-gpu-hook.dev/gpu=intel", intelOnly(e)}} {
				out, err := gpu(t, r.dev)
				if err != nil {
					t.Fatalf("--device %s after the node setup: %v\n%s", r.dev, err, out)
				}
				checkRow(t, e, out, r.folders)
			}
			out, err = criRun(t, rt, n.share, 10*boot+1, pod)
			if err != nil {
				t.Fatalf("a CRI pod with CDI device nvidia.com/gpu=all after the node setup: %v\n%s", err, out)
			}
			checkRow(t, e, out, pod.folders(e))
		})
	}
	n.stop(t)
	if after := hostWSLMounts(t); after != mountsBefore {
		t.Errorf("WSL mounts leaked into the host:\n%s", after)
	}
}
