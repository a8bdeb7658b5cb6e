package packages

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/fixture"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/simhost"
)

// staleSpec is an nvidia-ctk-shaped spec whose driver folder no longer
// exists, seeded into the root before the package is installed: doctor
// must name it, and the package must leave it as it was.
var staleSpec = fixture.NVIDIASpec("nvltwi.inf_amd64_00c0ffee00c0ffee")

// engineDirs are the engines' configuration, which the package must not
// change on install, remove or purge.
var engineDirs = []string{"etc/docker", "etc/containers", "etc/containerd", "etc/cdi"}

// volatile are the paths apt and dpkg change for their own bookkeeping
// (and the kernel's mounts), left out of the before/after file lists.
var volatile = []string{"proc", "dev", "tmp", "run", "var/lib/dpkg", "var/lib/apt", "var/cache", rpmDB,
	"var/log/apt", "var/log/dpkg.log", "var/log/alternatives.log", "etc/ld.so.cache"}

// TestPackage installs the .deb with apt into clean Debian 12 and 13 roots
// (hack/engines/root.sh, with the suites' own docker.io, podman and
// containerd), each under an overlay so the cached root stays clean, and
// checks: the package edits no engine configuration; `info` and `doctor`
// work under the simulated laptop; `apt-get remove` leaves only the
// conffile, and `apt-get purge` leaves the file list exactly as before.
func TestPackage(t *testing.T) {
	if testing.Short() {
		t.Skip("package test: skipped under -short")
	}
	if os.Geteuid() != 0 {
		t.Skip("package tests use debootstrap, overlayfs and chroot: run them as root")
	}
	for _, tool := range []string{"debootstrap", "unshare", "chroot", "gcc"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed: hack/setup.sh installs it", tool)
		}
	}
	repo := moduleRoot(t)
	tmp := t.TempDir()
	deb := strings.TrimSpace(run(t, repo, nil, "./hack/packages.sh", filepath.Join(tmp, "out"), "amd64", "deb"))
	t.Run("lintian", func(t *testing.T) { lintian(t, deb) })
	host, dxgsim := laptop(t, repo, tmp)

	for _, suite := range []string{"bookworm", "trixie"} {
		t.Run(suite, func(t *testing.T) {
			lower := strings.TrimSpace(run(t, repo, nil, "./hack/engines/root.sh", suite))
			o := newOverlay(t, lower)
			o.write(t, "etc/cdi/nvidia.yaml", staleSpec)
			o.write(t, "etc/docker/daemon.json", "{\n  \"log-level\": \"warn\"\n}\n")
			before := o.snapshot(t)
			o.write(t, "tmp/"+filepath.Base(deb), string(must(os.ReadFile(deb))))

			out := o.chroot(t, nil, "apt-get", "install", "-y", "--no-install-recommends", "/tmp/"+filepath.Base(deb))
			installed := o.snapshot(t)
			checkInstalled(t, "postinst", out, before, installed, "usr/share/doc/wsl-gpu-hook/copyright", "usr/share/zsh/vendor-completions/_wsl-gpu-ctl",
				"usr/share/doc/wsl-gpu-hook/docs/kubernetes.md", "usr/share/doc/wsl-gpu-hook/ARCHITECTURE.md")

			// The simulated laptop inside the root: its files at
			// /usr/lib/wsl, the simulator's node at /dev/dxg.
			o.copyTree(t, filepath.Join(host, "usr/lib/wsl"), "usr/lib/wsl")
			if err := os.MkdirAll(filepath.Join(o.upper, "dev"), 0o755); err != nil {
				t.Fatal(err)
			}
			sim := []string{dxgsim, "--profile", "nvidia-laptop", "--dev", filepath.Join(o.upper, "dev/dxg"), "--"}
			info := o.chroot(t, sim, "wsl-gpu-hook", "info")
			for _, w := range []string{"nvidia  10de:2520  0x4486d1", "nvltwi.inf_amd64_7b2a5c1c4e6f8d90", "iigd_dch.inf_amd64_ba2ab4a3e0e0b2ea", "enumerated with ENUMADAPTERS3"} {
				if !strings.Contains(info, w) {
					t.Errorf("info lacks %q:\n%s", w, info)
				}
			}
			code, doctor := o.chrootCode(t, sim, "wsl-gpu-hook", "doctor")
			t.Logf("doctor in the %s root:\n%s", suite, doctor)
			if code != 1 {
				t.Errorf("doctor exit status %d, want 1 (the stale spec fails)", code)
			}
			for _, w := range []string{
				"ok    dxg: /dev/dxg: character device 10:229, mode 0666, opens read-write as root",
				"ok    adapter 1: NVIDIA GeForce RTX 3060 Laptop GPU (nvidia, LUID 0x4486d1, WDDM 3.0): folder /usr/lib/wsl/drivers/nvltwi.inf_amd64_7b2a5c1c4e6f8d90",
				"ok    lib dir: /usr/lib/wsl/lib",
				"fail  cdi /etc/cdi/nvidia.yaml: nvidia.com/gpu is stale",
				"-> fix: sudo nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml, or use ours",
				"ok    podman hooks.d: /usr/share/containers/oci/hooks.d/wsl-gpu-hook.json runs /usr/bin/wsl-gpu-hook",
				"warn  docker runtime: /etc/docker/daemon.json has no \"wsl-gpu\" runtime",
			} {
				if !strings.Contains(doctor, w) {
					t.Errorf("doctor lacks %q", w)
				}
			}
			// The hook's log, as a container start would leave it.
			o.write(t, "var/log/wsl-gpu-hook.log", `time="2026-11-23T03:00:00Z" level=info msg="gave the GPU"`+"\n")
			// And the SONAMEs it keeps across boots (var/cache is not in
			// the snapshots: it is checked by name).
			o.write(t, "var/cache/wsl-gpu-hook/sonames-0123456789abcdef.bin", "WSLGPUSN")
			if err := os.RemoveAll(filepath.Join(o.upper, "usr/lib/wsl")); err != nil {
				t.Fatal(err)
			}

			o.chroot(t, nil, "apt-get", "remove", "-y", "wsl-gpu-hook")
			removed := o.snapshot(t)
			wantSame(t, "engine configuration after remove", before.engines, removed.engines)
			wantSame(t, "files after remove (the conffile and the log stay)", withKept(before.files, removed.files,
				"etc/wsl-gpu-hook", "etc/wsl-gpu-hook/config.toml", "var/log/wsl-gpu-hook.log"), removed.files)

			o.chroot(t, nil, "apt-get", "purge", "-y", "wsl-gpu-hook")
			purged := o.snapshot(t)
			wantSame(t, "engine configuration after purge", before.engines, purged.engines)
			wantSame(t, "files after purge", before.files, purged.files)
			if _, err := os.Lstat(filepath.Join(o.upper, "var/cache/wsl-gpu-hook")); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("/var/cache/wsl-gpu-hook after purge: %v, want it gone", err)
			}

			t.Run("upgrade regenerates the CDI specs", func(t *testing.T) {
				upgradeRegeneratesSpecs(t, lower, deb, host, dxgsim)
			})
			t.Run("CDI specs beside NVIDIA's then removal", func(t *testing.T) {
				cdiLifecycle(t, lower, deb, host, dxgsim, filepath.Join(repo, "pkg/setup/cdiinstall/testdata/nvidia-ctk-1.20-wsl.yaml"))
			})
		})
	}
}

// checkInstalled: the install's script (what) printed the commands, no
// engine configuration changed, and the root has what every package
// installs (but the apk: TestAPK) and extra.
func checkInstalled(t *testing.T, what, out string, before, installed snapshot, extra ...string) {
	t.Helper()
	if !strings.Contains(out, "sudo wsl-gpu-hook install docker") {
		t.Errorf("%s does not print the install commands:\n%s", what, out)
	}
	wantSame(t, "engine configuration after install", before.engines, installed.engines)
	for _, f := range append([]string{"usr/bin/wsl-gpu-hook", "usr/bin/wsl-gpu-ctl", "usr/bin/wsl-gpu-runtime",
		"usr/libexec/wsl-gpu-hook/nvidia-container-runtime-hook", "etc/wsl-gpu-hook/config.toml",
		"usr/share/containers/oci/hooks.d/wsl-gpu-hook.json", "usr/lib/systemd/system/wsl-gpu-hook-cdi.service",
		"usr/share/man/man1/wsl-gpu-hook.1.gz", "usr/share/man/man1/wsl-gpu-ctl.1.gz",
		"usr/share/bash-completion/completions/wsl-gpu-ctl"}, extra...) {
		if _, ok := installed.files[f]; !ok {
			t.Errorf("installed root lacks %s", f)
		}
	}
}

// laptop builds the simulator and the simulated NVIDIA laptop's host tree
// (its /usr/lib/wsl) under tmp, and returns the tree and the simulator.
func laptop(t *testing.T, repo, tmp string) (host, dxgsim string) {
	t.Helper()
	dxgsim = filepath.Join(tmp, "dxgsim")
	run(t, repo, nil, "go", "build", "-o", dxgsim, "./test/dxgsim")
	p, err := simhost.Lookup("nvidia-laptop")
	if err != nil {
		t.Fatal(err)
	}
	host = filepath.Join(tmp, "host")
	cache := os.Getenv("E2E_CACHE")
	if cache == "" {
		cache = "/var/cache/wsl-gpu-hook-e2e"
	}
	if err := fixture.Build(host, p, fixture.Options{CacheDir: filepath.Join(cache, "fixture")}); err != nil {
		t.Fatal(err)
	}
	return host, dxgsim
}

// upgradeRegeneratesSpecs: on a fresh root, `wsl-gpu-ctl install cdi`
// writes the specs and their unit; an older version's specs stand in
// for them (a changed file); the package upgraded over itself (postinst
// configure with the old version: what dpkg runs on an upgrade) writes
// them again, with the command and options the unit names.
func upgradeRegeneratesSpecs(t *testing.T, lower, deb, host, dxgsim string) {
	o := newOverlay(t, lower)
	o.write(t, "tmp/"+filepath.Base(deb), string(must(os.ReadFile(deb))))
	o.chroot(t, nil, "apt-get", "install", "-y", "--no-install-recommends", "/tmp/"+filepath.Base(deb))
	o.copyTree(t, filepath.Join(host, "usr/lib/wsl"), "usr/lib/wsl")
	if err := os.MkdirAll(filepath.Join(o.upper, "dev"), 0o755); err != nil {
		t.Fatal(err)
	}
	sim := []string{dxgsim, "--profile", "nvidia-laptop", "--dev", filepath.Join(o.upper, "dev/dxg"), "--"}
	o.chroot(t, sim, "wsl-gpu-ctl", "install", "cdi")
	specs, err := filepath.Glob(filepath.Join(o.upper, "etc/cdi/*.json"))
	if err != nil || len(specs) == 0 {
		t.Fatalf("install cdi wrote no spec in /etc/cdi: %v", err)
	}
	want := map[string]string{}
	for _, f := range specs {
		want[f] = string(must(os.ReadFile(f)))
		if err := os.WriteFile(f, []byte("# written by an older wsl-gpu-hook\n"+want[f]), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := o.chroot(t, sim, "apt-get", "install", "-y", "--reinstall", "/tmp/"+filepath.Base(deb))
	if !strings.Contains(out, "wsl-gpu-hook: regenerated the CDI specs (/usr/bin/wsl-gpu-hook cdi generate") {
		t.Errorf("postinst did not say it regenerated the specs:\n%s", out)
	}
	for f, w := range want {
		if got := string(must(os.ReadFile(f))); got != w {
			t.Errorf("%s after the upgrade:\n%s\nwant what install cdi wrote:\n%s", f, got, w)
		}
	}
}

// cdiLifecycle is issue 33 in a Debian root with the package installed,
// on the simulated laptop:
//   - `cdi generate` beside NVIDIA's nvidia.yaml (what nvidia-ctk 1.20
//     writes) fails with one line and writes nothing (it wrote its specs,
//     which engines then refused, and failed after);
//   - the unit `install cdi` wrote, its ExecStart run under its sandbox
//     as far as a test without systemd can make it (sandboxed), rewrites
//     a changed spec; once NVIDIA's refresh service has written its spec,
//     it fails with one line and writes nothing;
//   - `apt-get remove` leaves no spec of ours, no unit, no enabled unit,
//     and NVIDIA's spec as it was (prerm knew only an old name before).
func cdiLifecycle(t *testing.T, lower, deb, host, dxgsim, nvidiaSpec string) {
	o := newOverlay(t, lower)
	o.write(t, "tmp/"+filepath.Base(deb), string(must(os.ReadFile(deb))))
	before := o.snapshot(t)
	o.chroot(t, nil, "apt-get", "install", "-y", "--no-install-recommends", "/tmp/"+filepath.Base(deb))
	o.copyTree(t, filepath.Join(host, "usr/lib/wsl"), "usr/lib/wsl")
	if err := os.MkdirAll(filepath.Join(o.upper, "dev"), 0o755); err != nil {
		t.Fatal(err)
	}
	sim := []string{dxgsim, "--profile", "nvidia-laptop", "--dev", filepath.Join(o.upper, "dev/dxg"), "--"}
	nvidia := string(must(os.ReadFile(nvidiaSpec)))
	cdiDir := filepath.Join(o.upper, "etc/cdi") // the roots have none: all of it is in upper
	conflict := func(prog string) string {
		return prog + ": cdi generate: nvidia.com/gpu already defined by /etc/cdi/nvidia.yaml (nvidia.com/gpu=all): nothing changed: " +
			"remove that file (NVIDIA's refresh service writes it again: systemctl disable --now nvidia-cdi-refresh.path nvidia-cdi-refresh.service), " +
			"or leave the kind to it with --skip-kind nvidia.com/gpu (for the boot unit: wsl-gpu-hook install --nvidia-kind=skip cdi)\n"
	}

	o.write(t, "etc/cdi/nvidia.yaml", nvidia)
	specs := listFiles(t, cdiDir)
	code, out := o.chrootCode(t, sim, "wsl-gpu-ctl", "cdi", "generate")
	if code == 0 || out != conflict("wsl-gpu-ctl") {
		t.Errorf("cdi generate beside NVIDIA's spec: exit %d\n%s\nwant a failure and only\n%s", code, out, conflict("wsl-gpu-ctl"))
	}
	wantSame(t, "/etc/cdi after cdi generate beside NVIDIA's spec", specs, listFiles(t, cdiDir))

	// install cdi on a host without NVIDIA's spec, enabled as `systemctl
	// enable` does it (the roots have no systemd).
	if err := os.Remove(filepath.Join(cdiDir, "nvidia.yaml")); err != nil {
		t.Fatal(err)
	}
	o.chroot(t, sim, "wsl-gpu-ctl", "install", "cdi")
	unitPath := filepath.Join(o.upper, "etc/systemd/system/wsl-gpu-hook-cdi.service")
	unit := string(must(os.ReadFile(unitPath)))
	link := filepath.Join(o.upper, "etc/systemd/system/multi-user.target.wants/wsl-gpu-hook-cdi.service")
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/systemd/system/wsl-gpu-hook-cdi.service", link); err != nil {
		t.Fatal(err)
	}
	installed := listFiles(t, cdiDir)
	if len(installed) != 2 {
		t.Fatalf("install cdi wrote %v, want the NVIDIA and wsl-gpu-hook.dev specs", installed)
	}
	for f := range installed {
		if err := os.WriteFile(filepath.Join(cdiDir, f), []byte("# written by an older wsl-gpu-hook\n"+installed[f]), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The sandbox holds: nothing but the spec dir is writable, and no
	// capability is left.
	if code, out := sandboxed(t, o, sim, unit, "touch", "/etc/wsl-gpu-hook-sandbox"); code == 0 || !strings.Contains(out, "Read-only file system") {
		t.Errorf("touch /etc/wsl-gpu-hook-sandbox in the sandbox: exit %d\n%s", code, out)
	}
	if code, out := sandboxed(t, o, sim, unit, "grep", "^CapEff:", "/proc/self/status"); code != 0 || out != "CapEff:\t0000000000000000\n" {
		t.Errorf("capabilities in the sandbox: exit %d\n%s", code, out)
	}
	if code, out := sandboxed(t, o, sim, unit); code != 0 {
		t.Fatalf("the unit under its sandbox: exit %d\n%s", code, out)
	}
	wantSame(t, "/etc/cdi after the unit ran", installed, listFiles(t, cdiDir))

	// NVIDIA's refresh service writes its spec at boot; then ours runs.
	o.write(t, "etc/cdi/nvidia.yaml", nvidia)
	specs = listFiles(t, cdiDir)
	if code, out := sandboxed(t, o, sim, unit); code == 0 || out != conflict("wsl-gpu-hook") {
		t.Errorf("the unit beside NVIDIA's spec: exit %d\n%s\nwant a failure and only\n%s", code, out, conflict("wsl-gpu-hook"))
	}
	wantSame(t, "/etc/cdi after the unit ran beside NVIDIA's spec", specs, listFiles(t, cdiDir))

	if err := os.RemoveAll(filepath.Join(o.upper, "usr/lib/wsl")); err != nil {
		t.Fatal(err)
	}
	out = o.chroot(t, nil, "apt-get", "remove", "-y", "wsl-gpu-hook")
	t.Logf("apt-get remove:\n%s", out)
	removed := o.snapshot(t)
	wantSame(t, "files after remove (NVIDIA's spec and the conffile stay)", withKept(before.files, removed.files,
		"etc/wsl-gpu-hook", "etc/wsl-gpu-hook/config.toml", "etc/cdi", "etc/cdi/nvidia.yaml"), removed.files)
	if got := string(must(os.ReadFile(filepath.Join(cdiDir, "nvidia.yaml")))); got != nvidia {
		t.Error("NVIDIA's spec changed on remove")
	}
}

// sandboxed runs unit's ExecStart in the root as systemd would under the
// unit's sandbox, as far as plain mounts and setpriv can make it:
// ProtectSystem=strict (the root read-only but for its
// ConfigurationDirectory= and ReadWritePaths=), PrivateTmp=, no
// capability in the bounding set, NoNewPrivileges=. The device, seccomp
// and /proc settings need systemd itself: the roots have none, and the
// machine running the tests has no systemd as pid 1.
// argv, when given, runs instead of ExecStart.
func sandboxed(t *testing.T, o *overlay, sim []string, unit string, argv ...string) (int, string) {
	t.Helper()
	var execStart []string
	script := "set -e\n"
	for _, line := range strings.Split(unit, "\n") {
		k, v, _ := strings.Cut(line, "=")
		switch k {
		case "ExecStart":
			execStart = strings.Fields(v) // install cdi quotes nothing here
		case "ConfigurationDirectory":
			for _, d := range strings.Fields(v) {
				script += fmt.Sprintf("mkdir -p /etc/%[1]s; mount --bind /etc/%[1]s /etc/%[1]s\n", d)
			}
		case "ReadWritePaths":
			for _, d := range strings.Fields(v) {
				script += fmt.Sprintf("mount --bind %[1]s %[1]s\n", strings.TrimLeft(d, "-+"))
			}
		case "PrivateTmp":
			if v == "yes" {
				script += "mount -t tmpfs tmpfs /tmp\n"
			}
		}
	}
	if !strings.Contains(unit, "\nProtectSystem=strict\n") || !strings.Contains(unit, "\nCapabilityBoundingSet=\n") || !strings.Contains(unit, "\nNoNewPrivileges=yes\n") {
		t.Fatalf("the unit is not sandboxed as this test assumes:\n%s", unit)
	}
	script += "mount -o remount,bind,ro /\nexec setpriv --no-new-privs --bounding-set=-all --inh-caps=-all -- \"$@\"\n"
	if argv == nil {
		argv = execStart
	}
	return o.chrootCode(t, sim, append([]string{"sh", "-c", script, "sh"}, argv...)...)
}

// lintian fails on every error or warning the package's overrides do not
// explain (packaging/deb/lintian-overrides says why each is kept).
func lintian(t *testing.T, deb string) {
	if _, err := exec.LookPath("lintian"); err != nil {
		t.Skip("lintian is not installed: hack/setup.sh installs it")
	}
	code, out := runCode(t, "", nil, "lintian", "--fail-on", "error,warning", "--tag-display-limit", "0", deb)
	if code != 0 {
		t.Errorf("lintian: exit %d\n%s", code, out)
	}
}

// overlay is a writable view of a cached root: writes land in upper.
// It is mounted only inside each command's private mount namespace, so
// nothing stays mounted on the host whatever happens to the test.
type overlay struct {
	lower, upper, work, merged string
	// minFiles is the fewest files a snapshot of the root may list
	// (fewer: the overlay did not mount).
	minFiles int
}

func newOverlay(t *testing.T, lower string) *overlay {
	t.Helper()
	dir := t.TempDir()
	o := &overlay{lower: lower, upper: filepath.Join(dir, "upper"), work: filepath.Join(dir, "work"), merged: filepath.Join(dir, "merged"), minFiles: 1000}
	for _, d := range []string{o.upper, o.work, o.merged} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return o
}

// in wraps script (sh, with $m the merged root and the rest in "$@") so it
// runs in a private mount namespace with the overlay mounted.
func (o *overlay) in(script string, args ...string) []string {
	return append([]string{"unshare", "--mount", "--propagation", "private", "sh", "-ec",
		`mount -t overlay overlay -o "lowerdir=$1,upperdir=$2,workdir=$3" "$4"; m=$4; shift 4; ` + script,
		"sh", o.lower, o.upper, o.work, o.merged}, args...)
}

// chroot runs argv in the root (with /proc mounted), under wrap (the
// simulator) when given, and fails the test on a non-zero exit.
func (o *overlay) chroot(t *testing.T, wrap []string, argv ...string) string {
	t.Helper()
	code, out := o.chrootCode(t, wrap, argv...)
	if code != 0 {
		t.Fatalf("%s in the root: exit %d\n%s", strings.Join(argv, " "), code, out)
	}
	return out
}

func (o *overlay) chrootCode(t *testing.T, wrap []string, argv ...string) (int, string) {
	t.Helper()
	cmd := append(append([]string{}, wrap...), o.in(`mount -t proc proc "$m/proc"; exec chroot "$m" "$@"`, argv...)...)
	env := []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "DEBIAN_FRONTEND=noninteractive", "LC_ALL=C"}
	return runCode(t, "", env, cmd...)
}

// write puts a file into the root (through the upper layer).
func (o *overlay) write(t *testing.T, p, content string) {
	t.Helper()
	full := filepath.Join(o.upper, p)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (o *overlay) copyTree(t *testing.T, src, dst string) {
	t.Helper()
	full := filepath.Join(o.upper, dst)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		t.Fatal(err)
	}
	run(t, "", nil, "cp", "-a", src, full)
}

// snapshot is the root's file list and its engines' checksums.
type snapshot struct {
	// files maps path -> type, mode, size, link target; a directory's size
	// is left out, as overlayfs reports the copied-up one.
	files   map[string]string
	engines map[string]string // path under engineDirs -> sha256 or link target
}

func (o *overlay) snapshot(t *testing.T) snapshot {
	t.Helper()
	var prune []string
	for _, v := range volatile {
		prune = append(prune, "-path", "./"+v, "-o")
	}
	script := `cd "$m"; find . -xdev \( ` + strings.Join(prune[:len(prune)-1], " ") + ` \) -prune -o -type d -printf '%P\td %m\n' -o -printf '%P\t%y %m %s %l\n'
echo '--- engines'
for d in ` + strings.Join(engineDirs, " ") + `; do [ -d "$d" ] && find "$d" -type f -exec sha256sum {} + ; [ -d "$d" ] && find "$d" -type l -printf '%l  %p\n'; done; true`
	code, out := runCode(t, "", nil, o.in(script)...)
	if code != 0 {
		t.Fatalf("snapshot: exit %d\n%s", code, out)
	}
	s := snapshot{files: map[string]string{}, engines: map[string]string{}}
	files, engines, _ := strings.Cut(out, "--- engines\n")
	for _, line := range strings.Split(files, "\n") {
		if p, v, ok := strings.Cut(line, "\t"); ok && p != "" {
			s.files[p] = v
		}
	}
	for _, line := range strings.Split(engines, "\n") {
		if sum, p, ok := strings.Cut(line, "  "); ok {
			s.engines[p] = sum
		}
	}
	if len(s.files) < o.minFiles {
		t.Fatalf("snapshot lists only %d files: the root did not mount?\n%s", len(s.files), out)
	}
	return s
}

// withKept is before plus the paths in keep, as they are in after.
func withKept(before, after map[string]string, keep ...string) map[string]string {
	want := map[string]string{}
	for k, v := range before {
		want[k] = v
	}
	for _, k := range keep {
		if v, ok := after[k]; ok {
			want[k] = v
		} else {
			want[k] = "(missing)"
		}
	}
	return want
}

// wantSame reports every path that differs between two listings.
func wantSame(t *testing.T, what string, want, got map[string]string) {
	t.Helper()
	var diffs []string
	for k, v := range want {
		if g, ok := got[k]; !ok {
			diffs = append(diffs, "missing "+k)
		} else if g != v {
			diffs = append(diffs, fmt.Sprintf("changed %s: %s -> %s", k, v, g))
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			diffs = append(diffs, "left behind "+k)
		}
	}
	if len(diffs) > 0 {
		sort.Strings(diffs)
		t.Errorf("%s differ:\n%s", what, strings.Join(diffs, "\n"))
	}
}

func run(t *testing.T, dir string, env []string, argv ...string) string {
	t.Helper()
	code, out := runCode(t, dir, env, argv...)
	if code != 0 {
		t.Fatalf("%s: exit %d\n%s", strings.Join(argv, " "), code, out)
	}
	return out
}

// runCode runs argv and returns its exit status and output; stderr is
// kept apart so callers reading stdout get only what they asked for.
func runCode(t *testing.T, dir string, env []string, argv ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	if env != nil {
		cmd.Env = env
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if stderr.Len() > 0 {
		t.Logf("%s: stderr:\n%s", filepath.Base(argv[0]), stderr.String())
	}
	if exit, ok := err.(*exec.ExitError); ok {
		return exit.ExitCode(), stdout.String() + stderr.String()
	}
	if err != nil {
		t.Fatalf("run %s: %v", strings.Join(argv, " "), err)
	}
	return 0, stdout.String()
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the test directory")
		}
		dir = parent
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
