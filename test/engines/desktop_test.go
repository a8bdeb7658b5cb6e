package engines

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/fixture"
)

// The simulated Docker Desktop, as faithful as what is known of it allows
// (../shared/reference/desktop.md): the Docker 29 daemon (moby's module)
// in a mount namespace of its own whose root is Docker Desktop's layer (an
// os-release that makes `docker info` say "Docker Desktop") over the
// Debian 13 root, read-only as LinuxKit's, with a tmpfs upper layer and a
// tmpfs /run, so every restart starts from the same root; only
// /var/lib/docker (the data disk) is kept across restarts. /dev/dxg and /usr/lib/wsl come from the simulated host, as WSL
// mounts them into every distro. Nothing of the project is on its file
// system or PATH. The user has the docker CLI (Debian 13's) and the socket
// only, and runs as nobody.
//
// What it cannot follow: the LinuxKit image itself, the service container
// dockerd runs in, Enhanced
// Container Isolation, settings an administrator locks, and Docker
// Desktop's own proxy of the socket into the user's distro.
type desktopSim struct {
	m       *matrix
	profile string
	host    string // the simulated host tree, a private copy
	folders string // dxgsim --folder-file: a driver update while running
	layer   string // Docker Desktop's layer over the Debian 13 root
	data    string // the data disk, /var/lib/docker inside
	sockDir string // the socket's dir, shown at /run/desktop inside
	engineUser
	config string   // the user's DOCKER_CONFIG
	noGPU  bool     // WSL gives the VM no GPU: no /dev/dxg, no /usr/lib/wsl
	extra  []string // more dockerd flags (Settings > Docker Engine)
	d      *daemon
	starts int
}

// newDesktop lays out a simulated Docker Desktop on a host of profile;
// start boots it.
func newDesktop(t *testing.T, m *matrix, profile string, userBin string) *desktopSim {
	t.Helper()
	dir := shortTemp(t, "wgdd-")
	s := &desktopSim{m: m, profile: profile,
		folders: filepath.Join(dir, "folders"), layer: filepath.Join(dir, "layer"),
		data: filepath.Join(dir, "data"), sockDir: filepath.Join(dir, "sock")}
	s.host = fixture.Host(t, profile, fixture.Options{})
	for _, d := range []string{filepath.Join(s.layer, "etc"), s.data, s.sockDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// moby's operatingsystem reads PRETTY_NAME: LinuxKit's says this.
	osRelease := "PRETTY_NAME=\"Docker Desktop\"\nNAME=\"Docker Desktop\"\nID=docker-desktop\n"
	if err := os.WriteFile(filepath.Join(s.layer, "etc/os-release"), []byte(osRelease), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.folders, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// Docker Desktop bundles NVIDIA's toolkit: dockerd finds its legacy
	// hook on PATH at start and serves --gpus with it.
	if err := os.MkdirAll(filepath.Join(s.layer, "usr/local/bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.layer, "usr/local/bin/nvidia-container-runtime-hook"), []byte(nvidiaStandIn), 0o755); err != nil {
		t.Fatal(err)
	}
	// The user's side: the docker CLI, the socket, its own config dir.
	config := filepath.Join(dir, "user-config")
	if err := os.MkdirAll(config, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(config, 0o777)
	s.config = config
	os.Chmod(dir, 0o755)
	s.engineUser = engineUser{"PATH=" + userBin + ":/usr/bin:/bin", "DOCKER_HOST=unix://" + filepath.Join(s.sockDir, "docker.sock"),
		"DOCKER_CONFIG=" + config, "HOME=" + config}
	return s
}

// start boots Docker Desktop: a fresh root, the kept data disk.
func (s *desktopSim) start(t *testing.T) {
	t.Helper()
	s.starts++
	scratch := shortTemp(t, "wgdd-root-")
	var args []string
	if !s.noGPU {
		args = append(args, "--profile", s.profile, "--bind-host", s.host, "--folder-file", s.folders)
	}
	pivot := []string{s.m.pivot, "--root", s.layer + ":" + s.m.trixie, "--scratch", scratch, "--tmpfs-upper", "--private-tmp", "--read-only",
		"--bind", filepath.Join(engineCache(), "engines"),
		"--bind", s.data + ":/var/lib/docker", "--bind", s.sockDir + ":/run/desktop", "--",
		"dockerd", "-H", "unix:///run/desktop/docker.sock",
		"--iptables=false", "--ip6tables=false", "--bridge=none", "--storage-driver=vfs"}
	pivot = append(pivot, s.extra...)
	path := []string{s.m.engine(t, "dockerd"), s.m.engine(t, "containerd"), s.m.engine(t, "runc"), "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	d := &daemon{report: filepath.Join(t.TempDir(), "dxgsim.json")}
	if s.noGPU {
		d.cmd = exec.Command(pivot[0], pivot[1:]...)
	} else {
		d.cmd = exec.Command(s.m.e.sim, append(append(args, "--report", d.report, "--"), pivot...)...)
	}
	// Nothing of the project: no hook config, no hook on PATH.
	d.cmd.Env = []string{"PATH=" + strings.Join(path, ":"), "HOME=/root"}
	d.cmd.Stdout, d.cmd.Stderr = &d.stderr, &d.stderr
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s.d = d
	deadline := time.Now().Add(3 * time.Minute)
	for {
		// The user's CLI runs as nobody.
		if err := os.Chmod(filepath.Join(s.sockDir, "docker.sock"), 0o666); err == nil {
			if out, err := s.docker(t, "version", "--format", "{{.Server.Version}}"); err == nil {
				t.Logf("Docker Desktop start %d: engine %s", s.starts, strings.TrimSpace(out))
				break
			}
		}
		if time.Now().After(deadline) || d.cmd.ProcessState != nil {
			s.stop(t)
			t.Fatalf("the simulated Docker Desktop did not come up:\n%s", tail(d.stderr.String(), 30))
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// stop shuts Docker Desktop down: the engine stops its containers, and
// the root's upper layer dies with the namespace.
func (s *desktopSim) stop(t *testing.T) {
	t.Helper()
	if s.d != nil {
		s.d.stop(t)
		s.d = nil
	}
}

// restart is Docker Desktop's restart (or a Windows reboot): a new root.
func (s *desktopSim) restart(t *testing.T) {
	t.Helper()
	s.stop(t)
	s.start(t)
}

// engineUser is the user of a simulated desktop engine: an environment
// (PATH first) with the CLIs and the engine's socket, and nothing else of
// the machine. Its commands run as nobody.
type engineUser []string

// docker runs the user's docker CLI.
func (u engineUser) docker(t *testing.T, args ...string) (string, error) {
	t.Helper()
	return u.as(t, "", "docker", args...)
}

// as runs a command of the user's (docker, wsl-gpu-ctl), with stdin from
// the file named, if any.
func (u engineUser) as(t *testing.T, stdin string, name string, args ...string) (string, error) {
	t.Helper()
	path, err := lookIn(strings.TrimPrefix(u[0], "PATH="), name)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(path, args...)
	cmd.Env = u
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	return runBoundedIn(cmd, stdin)
}

// lookIn finds name in the PATH list p.
func lookIn(p, name string) (string, error) {
	for _, d := range filepath.SplitList(p) {
		if fi, err := os.Stat(filepath.Join(d, name)); err == nil && fi.Mode().IsRegular() {
			return filepath.Join(d, name), nil
		}
	}
	return "", fmt.Errorf("%s not in %s", name, p)
}

// driverUpdate renames adapter index's folder as a Windows driver update
// does, under the running engine.
func (s *desktopSim) driverUpdate(t *testing.T, index int, old, new string) {
	t.Helper()
	drivers := filepath.Join(s.host, fixture.DriversDir)
	if err := os.Rename(filepath.Join(drivers, old), filepath.Join(drivers, new)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.folders, fmt.Appendf(nil, "%d=%s\n", index, new), 0o644); err != nil {
		t.Fatal(err)
	}
}

// engineState is what uninstall must leave as it found it: containers,
// volumes and the spec files in the engine's CDI dirs.
func (s *desktopSim) engineState(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for _, args := range [][]string{
		{"ps", "-a", "--format", "{{.Names}} {{.Image}} {{.Status}}"},
		{"volume", "ls", "--format", "{{.Name}}"},
		// The spec files, seen from a container the engine binds its dirs
		// into. An empty /var/run/cdi may stay: dockerd made it as the
		// agent's bind source, and only a restart (a tmpfs) takes it away.
		{"run", "--rm", "--network", "none", "-v", "/etc:/e:ro", "-v", "/var/run:/r:ro", "wslgpu-test", "sh", "-c", "find /e/cdi /r/cdi ! -type d 2>/dev/null; true"},
	} {
		out, err := s.docker(t, args...)
		if err != nil {
			t.Fatalf("docker %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		// docker ps's status carries the uptime.
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			f := strings.Fields(l)
			if len(f) > 2 && args[0] == "ps" {
				l = strings.Join(f[:3], " ")
			}
			fmt.Fprintln(&b, l)
		}
	}
	return b.String()
}

const unresolvable = "unresolvable CDI devices"

// nvidiaStandIn stands in for NVIDIA's legacy prestart hook as Docker
// Desktop bundles it (its real one cannot run here): as
// nvidia-container-cli does on WSL, it binds the NVIDIA driver store
// folder and the lib dir's CUDA files into the container, at the host's
// paths, read-only, nosuid and nodev (libnvidia-container's remount
// flags). What it stands for is what a container asking both
// --gpus and our CDI device gets twice, if anything.
const nvidiaStandIn = `#!/bin/sh
# A test's stand-in for NVIDIA's nvidia-container-runtime-hook (prestart).
[ "$1" = prestart ] || exit 0
state=$(cat)
pid=$(printf '%s' "$state" | sed -n 's/.*"pid":\([0-9]*\).*/\1/p')
bundle=$(printf '%s' "$state" | sed -n 's/.*"bundle":"\([^"]*\)".*/\1/p')
root=$(sed -n 's/.*"root":{"path":"\([^"]*\)".*/\1/p' "$bundle/config.json")
case $root in /*) ;; *) root=$bundle/$root ;; esac
bind='mkdir -p "$(dirname "$1$2")"; [ -d "$2" ] && mkdir -p "$1$2" || touch "$1$2"; mount --bind -o ro,nosuid,nodev "$2" "$1$2"'
for f in /usr/lib/wsl/drivers/nv* /usr/lib/wsl/lib/libcuda.so.1.1 /usr/lib/wsl/lib/libcuda.so.1 /usr/lib/wsl/lib/libdxcore.so; do
	[ -e "$f" ] || continue
	nsenter -t "$pid" -m sh -c "$bind" sh "$root" "$f" || exit 1
done
`

// TestDockerDesktop runs install docker-desktop as docs/desktop.md says,
// against the simulated Docker Desktop, with nothing but the docker CLI:
// GPU containers by CDI for NVIDIA and Intel; a Docker Desktop restart (root
// wiped) and a Windows driver update, after which GPU containers work
// with no user step; uninstall leaves the engine as it was.
func TestDockerDesktop(t *testing.T) {
	m := setupMatrix(t)
	e := m.e
	img := projectImage(t)
	mountsBefore := hostWSLMounts(t)

	s := newDesktop(t, m, profile, img.userBin)
	s.start(t)
	defer s.stop(t)
	load(t, s, img)
	if out, err := s.docker(t, "info", "--format", "{{.OperatingSystem}}"); err != nil || strings.TrimSpace(out) != "Docker Desktop" {
		t.Fatalf("docker info: %v %q, want Docker Desktop", err, out)
	}
	before := s.engineState(t)

	gpu := func(t *testing.T, folders []string, args ...string) {
		t.Helper()
		out, err := s.docker(t, append(append([]string{"run", "--rm", "--network", "none"}, args...), "wslgpu-test", "sh", "-c", inside)...)
		if err != nil {
			t.Fatalf("docker run %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		checkRow(t, e, out, folders)
	}

	t.Run("before install: unresolvable CDI devices", func(t *testing.T) {
		out, err := s.docker(t, "run", "--rm", "--network", "none", "--device", "nvidia.com/gpu=all", "wslgpu-test", "true")
		if err == nil || !strings.Contains(out, unresolvable) {
			t.Fatalf("--device nvidia.com/gpu=all before install: %v\n%s", err, out)
		}
	})

	// doctor, from the user's distro, knows the engine behind the CLI.
	doctorSays := func(t *testing.T, want string) {
		t.Helper()
		out, _ := s.as(t, "", "wsl-gpu-ctl", "doctor")
		if line := grepLines(out, "docker desktop: "); !strings.HasPrefix(line, want) {
			t.Errorf("doctor's Docker Desktop line %q, want it to start %q:\n%s", line, want, out)
		}
	}
	doctorSays(t, "warn  docker desktop: Docker Desktop 29.8.0 has no GPU for AMD, Intel or Qualcomm and no CDI spec for NVIDIA")

	// The docs' command, typed in the user's own distro.
	out, err := s.as(t, "", "wsl-gpu-ctl", "install", "docker-desktop", "--image", img.ref)
	if err != nil {
		t.Fatalf("wsl-gpu-ctl install docker-desktop: %v\n%s", err, out)
	}
	t.Logf("install docker-desktop:\n%s", out)

	doctorSays(t, "ok    docker desktop: the agent wsl-gpu-hook keeps the CDI specs in Docker Desktop's /var/run/cdi")

	t.Run("NVIDIA by CDI", func(t *testing.T) { gpu(t, nvidiaOnly(e), "--device", "nvidia.com/gpu=all") })
	t.Run("NVIDIA's first GPU by index", func(t *testing.T) { gpu(t, nvidiaOnly(e), "--device", "nvidia.com/gpu=0") })
	t.Run("Intel", func(t *testing.T) { gpu(t, intelOnly(e), "--device", "wsl-gpu-hook.dev/gpu=intel") })
	t.Run("every GPU", func(t *testing.T) { gpu(t, allGPUs(e), "--device", "wsl-gpu-hook.dev/gpu=all") })
	t.Run("NVIDIA's --gpus beside ours: each folder once", func(t *testing.T) {
		// --gpus alone is Docker Desktop's own (the stand-in's).
		out, err := s.docker(t, "run", "--rm", "--network", "none", "--gpus", "all", "wslgpu-test", "sh", "-c", mountsInside)
		if err != nil || !strings.Contains(out, "mnt /usr/lib/wsl/drivers/"+e.nvidia) {
			t.Fatalf("--gpus all through NVIDIA's hook: %v\n%s", err, out)
		}
		out, err = s.docker(t, "run", "--rm", "--network", "none", "--gpus", "all", "--device", "nvidia.com/gpu=all",
			"wslgpu-test", "sh", "-c", inside+mountsInside)
		if err != nil {
			t.Fatalf("--gpus all --device nvidia.com/gpu=all: %v\n%s", err, out)
		}
		checkGPU(t, out, true, e.nvidia)
		if n := strings.Count(out, "mnt /usr/lib/wsl/drivers/"+e.nvidia+"\n"); n != 1 {
			t.Errorf("the NVIDIA folder is mounted %d times, want once:\n%s", n, out)
		}
	})
	t.Run("no device, no GPU", func(t *testing.T) {
		out, err := s.docker(t, "run", "--rm", "--network", "none", "wslgpu-test", "sh", "-c", "ls /dev/dxg /usr/lib/wsl 2>&1; true")
		if err != nil || !strings.Contains(out, "/dev/dxg: No such file or directory") || !strings.Contains(out, "/usr/lib/wsl: No such file or directory") {
			t.Fatalf("a container without a device got GPU files (%v):\n%s", err, out)
		}
	})

	t.Run("Docker Desktop restart", func(t *testing.T) {
		// The engine's root is read-only, and its /var/run, where the
		// specs are, is emptied by the restart.
		if out, err := s.docker(t, "run", "--rm", "--network", "none", "-v", "/etc:/e", "wslgpu-test", "touch", "/e/x"); err == nil || !strings.Contains(out, "Read-only file system") {
			t.Fatalf("the engine's root is writable: %v\n%s", err, out)
		}
		if out, err := s.docker(t, "run", "--rm", "--network", "none", "-v", "/var/run:/r", "wslgpu-test", "touch", "/r/written-before-restart"); err != nil {
			t.Fatalf("mark /var/run: %v\n%s", err, out)
		}
		s.restart(t)
		if out, _ := s.docker(t, "run", "--rm", "--network", "none", "-v", "/var/run:/r:ro", "wslgpu-test", "ls", "/r/written-before-restart"); !strings.Contains(out, "No such file") {
			t.Fatalf("the engine's /var/run was not reset by the restart:\n%s", out)
		}
		// No user step: the agent starts with the engine and writes the
		// specs again; the first GPU container may only have to wait for it.
		waitForSpecs(t, s, "nvidia.com/gpu=all")
		gpu(t, nvidiaOnly(e), "--device", "nvidia.com/gpu=all")
	})

	t.Run("Windows driver update", func(t *testing.T) {
		updated := "nvltwi.inf_amd64_00c0ffee00c0ffee"
		s.driverUpdate(t, 1, e.nvidia, updated)
		for _, c := range []struct {
			dev     string
			folders []string
		}{{"nvidia.com/gpu=all", []string{updated}}, {"wsl-gpu-hook.dev/gpu=all", []string{e.intel, updated}}} {
			out, err := s.docker(t, "run", "--rm", "--network", "none", "--device", c.dev, "wslgpu-test", "sh", "-c", inside)
			if err != nil {
				t.Fatalf("--device %s after the update: %v\n%s", c.dev, err, out)
			}
			checkGPU(t, out, true, c.folders...)
		}
	})

	t.Run("install again replaces the agent", func(t *testing.T) {
		out, err := s.as(t, "", "wsl-gpu-ctl", "install", "docker-desktop", "--image", img.ref)
		if err != nil || !strings.Contains(out, "removed the older agent container wsl-gpu-hook") {
			t.Fatalf("install again: %v\n%s", err, out)
		}
		out, _ = s.docker(t, "ps", "-a", "--filter", "label=dev.wsl-gpu-hook.role", "--format", "{{.Names}}")
		if strings.TrimSpace(out) != "wsl-gpu-hook" {
			t.Errorf("containers of ours after a second install: %q, want the one agent", out)
		}
	})

	t.Run("uninstall", func(t *testing.T) {
		out, err := s.as(t, "", "wsl-gpu-ctl", "uninstall", "docker-desktop")
		if err != nil {
			t.Fatalf("uninstall docker-desktop: %v\n%s", err, out)
		}
		if after := s.engineState(t); after != before {
			t.Errorf("uninstall left the engine changed:\nbefore:\n%s\nafter:\n%s", before, after)
		}
		out, err = s.docker(t, "run", "--rm", "--network", "none", "--device", "nvidia.com/gpu=all", "wslgpu-test", "true")
		if err == nil || !strings.Contains(out, unresolvable) {
			t.Errorf("--device nvidia.com/gpu=all after uninstall: %v\n%s", err, out)
		}
	})
	s.stop(t)
	if after := hostWSLMounts(t); after != mountsBefore {
		t.Errorf("WSL mounts leaked into the host:\n%s", after)
	}
	// The engine's spec dirs are its own: nothing reached the host's.
	specs, _ := filepath.Glob("/run/cdi/*")
	etc, _ := filepath.Glob("/etc/cdi/*")
	for _, p := range append(specs, etc...) {
		if data, err := os.ReadFile(p); err == nil && strings.Contains(string(data), "volumes/wsl-gpu-hook") {
			t.Errorf("the agent's spec %s appeared on the host", p)
		}
	}
}

// TestDockerDesktopBuild: GPU in `docker build` on the simulated Docker
// Desktop, through the engine's own builder (buildx, as Docker Desktop's
// CLI has it), with the built-in Dockerfile frontend and a `# syntax=` one
// from a local registry: nothing before install, each vendor's device
// after it and after a restart, no GPU for a step that asks for none.
func TestDockerDesktopBuild(t *testing.T) {
	m := setupMatrix(t)
	e := m.e
	img := projectImage(t)
	_, syntax := m.frontendRegistry(t)
	s := newDesktop(t, m, profile, img.userBin)
	s.start(t)
	defer s.stop(t)
	load(t, s, img)
	plugins := filepath.Join(s.config, "cli-plugins")
	if err := os.MkdirAll(plugins, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(m.engine(t, "buildx"), "docker-buildx"), filepath.Join(plugins, "docker-buildx")); err != nil {
		t.Fatal(err)
	}
	docker := func(args ...string) (string, error) { return s.docker(t, args...) }
	t.Run("before install", func(t *testing.T) {
		checkGPUBuilds(t, docker, e, "", "wslgpu-test", []buildCase{{
			name: "nvidia.com/gpu=all,required", device: "nvidia.com/gpu=all,required", allow: true,
			fail: `required device "nvidia.com/gpu=all" is not registered`,
		}})
	})
	if out, err := s.as(t, "", "wsl-gpu-ctl", "install", "docker-desktop", "--image", img.ref); err != nil {
		t.Fatalf("install docker-desktop: %v\n%s", err, out)
	}
	for _, f := range []struct{ name, syntax string }{{"built-in frontend", ""}, {"# syntax= labs frontend", syntax}} {
		t.Run(f.name, func(t *testing.T) { checkGPUBuilds(t, docker, e, f.syntax, "wslgpu-test", gpuBuildCases(e)) })
	}
	t.Run("after a restart", func(t *testing.T) {
		s.restart(t)
		waitForSpecs(t, s, "nvidia.com/gpu=all")
		checkGPUBuilds(t, docker, e, "", "wslgpu-test", gpuBuildCases(e)[:2])
	})
	if out, err := s.as(t, "", "wsl-gpu-ctl", "uninstall", "docker-desktop"); err != nil {
		t.Fatalf("uninstall docker-desktop: %v\n%s", err, out)
	}
}

// TestDockerDesktopAMD is an AMD desktop under Docker Desktop: amd.com/gpu
// by CDI, which moby's `--gpus` never reaches there.
func TestDockerDesktopAMD(t *testing.T) {
	m := setupMatrix(t)
	img := projectImage(t)
	s := newDesktop(t, m, "amd-desktop", img.userBin)
	s.start(t)
	defer s.stop(t)
	load(t, s, img)
	amd := "u0398975.inf_amd64_cab3843582148687"
	script := ": <> /dev/dxg && echo dxg-open; ls /usr/lib/wsl/drivers | sed 's/^/folder /'; touch /usr/lib/wsl/lib/x 2>/dev/null && echo LIB-WRITABLE || echo lib-readonly"
	out, err := s.docker(t, "run", "--rm", "--network", "none", "--device", "amd.com/gpu=all", "wslgpu-test", "sh", "-c", script)
	if err == nil || !strings.Contains(out, unresolvable) {
		t.Fatalf("--device amd.com/gpu=all before install: %v, want %q:\n%s", err, unresolvable, out)
	}
	if out, err := s.as(t, "", "wsl-gpu-ctl", "install", "docker-desktop", "--image", img.ref); err != nil {
		t.Fatalf("install docker-desktop: %v\n%s", err, out)
	}
	for _, dev := range []string{"amd.com/gpu=all", "amd.com/gpu=0", "wsl-gpu-hook.dev/gpu=amd"} {
		out, err := s.docker(t, "run", "--rm", "--network", "none", "--device", dev, "wslgpu-test", "sh", "-c", script)
		if err != nil {
			t.Fatalf("--device %s: %v\n%s", dev, err, out)
		}
		for _, want := range []string{"dxg-open", "folder " + amd, "lib-readonly"} {
			if !strings.Contains(out, want) {
				t.Errorf("--device %s: the container lacks %q:\n%s", dev, want, out)
			}
		}
	}
	if out, err := s.as(t, "", "wsl-gpu-ctl", "uninstall", "docker-desktop"); err != nil {
		t.Fatalf("uninstall docker-desktop: %v\n%s", err, out)
	}
}

// TestDockerDesktopRefusals: what install says where it cannot work, in
// one line, with nothing changed in the engine.
func TestDockerDesktopRefusals(t *testing.T) {
	m := setupMatrix(t)
	img := projectImage(t)

	t.Run("no /dev/dxg in Docker Desktop's distro", func(t *testing.T) {
		s := newDesktop(t, m, profile, img.userBin)
		s.noGPU = true
		s.start(t)
		defer s.stop(t)
		load(t, s, img)
		before := s.engineState(t)
		out, err := s.as(t, "", "wsl-gpu-ctl", "install", "docker-desktop", "--image", img.ref)
		want := "wsl-gpu-ctl: Docker Desktop's engine has no /dev/dxg or no /usr/lib/wsl: WSL gives its VM no GPU: check that /dev/dxg exists in your own distro"
		if err == nil || !strings.HasPrefix(strings.TrimSpace(out), want) || strings.Count(strings.TrimSpace(out), "\n") != 0 {
			t.Fatalf("install without /dev/dxg: %v, want one line starting %q:\n%s", err, want, out)
		}
		if after := s.engineState(t); after != before {
			t.Errorf("the engine changed:\nbefore:\n%s\nafter:\n%s", before, after)
		}
	})

	t.Run("a spec dir the engine does not read", func(t *testing.T) {
		s := newDesktop(t, m, profile, img.userBin)
		s.start(t)
		defer s.stop(t)
		load(t, s, img)
		out, err := s.as(t, "", "wsl-gpu-ctl", "install", "docker-desktop", "--image", img.ref, "--cdi-dir", "/opt/cdi")
		want := "wsl-gpu-ctl: Docker Desktop's engine reads CDI specs from /etc/cdi, /var/run/cdi, not /opt/cdi: name one of those with --cdi-dir, or leave it out"
		if err == nil || strings.TrimSpace(out) != want {
			t.Fatalf("--cdi-dir /opt/cdi: %v\n%s\nwant %s", err, out, want)
		}
		// CDI off, as on engines 25 to 28.1 and where Settings turn it off.
		s.stop(t)
		if err := os.WriteFile(filepath.Join(s.data, "daemon.json"), []byte(`{"features": {"cdi": false}}`), 0o644); err != nil {
			t.Fatal(err)
		}
		s.extra = []string{"--config-file", "/var/lib/docker/daemon.json"}
		s.start(t)
		out, err = s.as(t, "", "wsl-gpu-ctl", "install", "docker-desktop", "--image", img.ref)
		want = `wsl-gpu-ctl: Docker Desktop's engine 29.8.0 has CDI turned off: remove "cdi": false from "features" in Settings > Docker Engine, then Apply & restart`
		if err == nil || strings.TrimSpace(out) != want {
			t.Fatalf("CDI off: %v\n%s\nwant %s", err, out, want)
		}
	})

	t.Run("an engine that is not Docker Desktop", func(t *testing.T) {
		docker, stop := m.startDockerIn(t, trixie(t, m))
		defer stop()
		info, err := docker("info", "--format", "{{json .}}")
		if err != nil {
			t.Fatal(err)
		}
		// The real CLI call, against a stand-in CLI printing that engine's info.
		bin := t.TempDir()
		os.Chmod(bin, 0o755)
		script := "#!/bin/sh\ncase \"$1\" in info) cat <<'EOF'\n" + info + "\nEOF\n;; *) echo \"unexpected docker $*\" >&2; exit 1;; esac\n"
		if err := os.WriteFile(filepath.Join(bin, "docker"), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(filepath.Join(img.userBin, "wsl-gpu-ctl"), "install", "docker-desktop", "--image", img.ref)
		cmd.Env = []string{"PATH=" + bin + ":/usr/bin:/bin"}
		out, _ := runBounded(cmd)
		want := `wsl-gpu-ctl: the docker CLI talks to an engine on "Debian GNU/Linux 13 (trixie)", not Docker Desktop: for a dockerd in this distro run ` + "`sudo wsl-gpu-ctl install cdi`"
		if !strings.HasPrefix(strings.TrimSpace(out), want) {
			t.Fatalf("install docker-desktop against Debian's engine:\n%s\nwant %s", out, want)
		}
	})
}

// waitForSpecs waits until a container with device dev starts: after a
// Docker Desktop restart the agent writes the specs within seconds.
func waitForSpecs(t *testing.T, s *desktopSim, dev string) {
	t.Helper()
	start := time.Now()
	for {
		out, err := s.docker(t, "run", "--rm", "--network", "none", "--device", dev, "wslgpu-test", "true")
		if err == nil {
			t.Logf("%s resolvable %.1fs after the engine answered", dev, time.Since(start).Seconds())
			return
		}
		if !strings.Contains(out, unresolvable) || time.Since(start) > 2*time.Minute {
			t.Fatalf("--device %s after the restart: %v\n%s", dev, err, out)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// desktopBuild is the project's image (`make image`) and the user's
// binaries, built once for every test that loads the image.
type desktopBuild struct {
	ref, archive, userBin string
}

var desktopOnce struct {
	done bool
	dir  string
	b    desktopBuild
	err  error
}

// projectImage runs `make image` once into a dir anybody can read: the
// archive users load, and the wsl-gpu-ctl they run beside the docker CLI.
func projectImage(t *testing.T) desktopBuild {
	t.Helper()
	if !desktopOnce.done {
		desktopOnce.done = true
		desktopOnce.dir, desktopOnce.b, desktopOnce.err = buildDesktopImage()
	}
	if desktopOnce.err != nil {
		t.Fatal(desktopOnce.err)
	}
	return desktopOnce.b
}

func buildDesktopImage() (dir string, b desktopBuild, err error) {
	dir, err = os.MkdirTemp("", "wgdd-image-")
	if err != nil {
		return "", b, err
	}
	b, err = buildDesktopImageIn(dir)
	return dir, b, err
}

func buildDesktopImageIn(dir string) (desktopBuild, error) {
	os.Chmod(dir, 0o755)
	b := desktopBuild{ref: "localhost/wsl-gpu-hook:load-test", archive: filepath.Join(dir, "wsl-gpu-hook-image.tar"), userBin: filepath.Join(dir, "user")}
	mk := exec.Command("make", "-s", "image", "BIN="+dir, "IMAGE="+b.ref)
	mk.Dir = "../.."
	if out, err := mk.CombinedOutput(); err != nil {
		return b, fmt.Errorf("make image: %v\n%s", err, out)
	}
	if err := os.MkdirAll(b.userBin, 0o755); err != nil {
		return b, err
	}
	ctl, err := os.ReadFile(filepath.Join(dir, "wsl-gpu-ctl"))
	if err != nil {
		return b, err
	}
	cli, err := os.ReadFile(filepath.Join(engineCache(), "roots/trixie/usr/bin/docker"))
	if err != nil {
		return b, fmt.Errorf("Debian 13's docker CLI: %w", err)
	}
	for name, data := range map[string][]byte{"wsl-gpu-ctl": ctl, "docker": cli} {
		if err := os.WriteFile(filepath.Join(b.userBin, name), data, 0o755); err != nil {
			return b, err
		}
	}
	return b, nil
}

// load puts the project's image and the test image into the engine, as a
// user does with a release's archive.
func load(t *testing.T, s *desktopSim, img desktopBuild) {
	t.Helper()
	if out, err := s.docker(t, "load", "-i", img.archive); err != nil || !strings.Contains(out, img.ref) {
		t.Fatalf("docker load: %v\n%s", err, out)
	}
	if out, err := s.as(t, s.m.e.imgTar, "docker", "import", "-", "wslgpu-test"); err != nil {
		t.Fatalf("docker import: %v\n%s", err, out)
	}
}
