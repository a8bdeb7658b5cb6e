package packages

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"tags.cncf.io/container-device-interface/pkg/cdi"
	cdispec "tags.cncf.io/container-device-interface/specs-go"
)

// rpmDB is where the tests keep a root's rpm database: Fedora's place
// (Debian's rpm would use /root/.rpmdb).
const rpmDB = "usr/lib/sysimage/rpm"

// TestRPM checks the rpm as Fedora and Podman Desktop's podman machine (a
// Fedora WSL distribution) use it, in roots laid out as Fedora's
// (fedoraRoot): rpmlint is clean for amd64 and arm64 (each waiver in
// packaging/rpm/rpmlint.toml says why). Then, in a Fedora root without
// podman and in a podman machine's (containers-common, here a stand-in,
// owns podman's hooks.d): the steps of packaging/podman-machine's playbook
// (rpm -i for its dnf task, `wsl-gpu-hook install cdi` under the simulated
// laptop, the unit enabled) print the commands, touch no engine
// configuration, and write specs whose names the CDI library podman links
// resolves, with hooks that run the installed binary; `rpm -U` to a later
// version regenerates them and keeps the administrator's config.toml;
// `rpm -e` leaves the root as it was but for that edited config.toml,
// kept as config.toml.rpmsave (and /etc/cdi, which install cdi made).
func TestRPM(t *testing.T) {
	if testing.Short() {
		t.Skip("package test: skipped under -short")
	}
	if os.Geteuid() != 0 {
		t.Skip("package tests use overlayfs and chroot: run them as root")
	}
	for _, tool := range []string{"rpm", "rpmbuild", "rpmlint", "busybox", "unshare", "chroot", "gcc"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed: hack/setup.sh installs it", tool)
		}
	}
	repo := moduleRoot(t)
	tmp := t.TempDir()
	old := buildPackage(t, repo, filepath.Join(tmp, "old"), "amd64", "rpm", "v0.1.0")
	cur := buildPackage(t, repo, filepath.Join(tmp, "new"), "amd64", "rpm", "v0.2.0")
	arm := buildPackage(t, repo, filepath.Join(tmp, "arm"), "arm64", "rpm", "")
	t.Run("rpmlint", func(t *testing.T) {
		for _, f := range []string{old, arm} {
			rpmlint(t, repo, f)
		}
	})
	steps := playbook(t, filepath.Join(repo, "packaging/podman-machine/wsl-gpu-hook.yaml"))
	host, dxgsim := laptop(t, repo, tmp)
	for _, tt := range []struct {
		name   string
		podman bool // containers-common owns /usr/share/containers/oci/hooks.d
	}{{"fedora", false}, {"podman machine", true}} {
		t.Run(tt.name, func(t *testing.T) {
			lower := fedoraRoot(t, filepath.Join(t.TempDir(), "root"))
			o := newOverlay(t, lower)
			o.minFiles = 100
			o.rpm(t, nil, "--initdb")
			if tt.podman {
				o.rpm(t, nil, "-i", containersCommon(t))
			}
			rpmLifecycle(t, o, steps, old, cur, host, dxgsim)
		})
	}
}

// rpmLifecycle: the playbook's steps, an upgrade and the erase, in o.
func rpmLifecycle(t *testing.T, o *overlay, steps []step, old, cur, host, dxgsim string) {
	before := o.snapshot(t)
	o.copyTree(t, filepath.Join(host, "usr/lib/wsl"), "usr/lib/wsl")
	if err := os.MkdirAll(filepath.Join(o.upper, "dev"), 0o755); err != nil {
		t.Fatal(err)
	}
	sim := []string{dxgsim, "--profile", "nvidia-laptop", "--dev", filepath.Join(o.upper, "dev/dxg"), "--"}
	for _, s := range steps {
		switch {
		case s.install:
			out := o.rpm(t, nil, "-i", old)
			checkInstalled(t, "%post", out, before, o.snapshot(t), "usr/share/licenses/wsl-gpu-hook/LICENSE", "usr/share/doc/wsl-gpu-hook/README.md", "usr/share/doc/wsl-gpu-hook/docs/kubernetes.md",
				"usr/share/zsh/site-functions/_wsl-gpu-ctl")
			if got := o.rpm(t, nil, "-q", "--qf", "[%{FILEFLAGS:fflags} %{FILENAMES}\n]", "wsl-gpu-hook"); !strings.Contains(got, "cn /etc/wsl-gpu-hook/config.toml\n") {
				t.Errorf("config.toml is not %%config(noreplace):\n%s", got)
			}
			o.rpm(t, nil, "-V", "wsl-gpu-hook")
		case s.enable != "":
			// What `systemctl enable` does for WantedBy=multi-user.target
			// (the roots have no systemd).
			o.symlink(t, "/etc/systemd/system/"+s.enable, "etc/systemd/system/multi-user.target.wants/"+s.enable)
		case s.argv[len(s.argv)-1] == "doctor":
			code, out := o.chrootCode(t, sim, s.argv...)
			t.Logf("%s (exit %d):\n%s", strings.Join(s.argv, " "), code, out)
			for _, w := range []string{"ok    cdi /etc/cdi/nvidia.com-gpu_wsl-gpu-hook.json: nvidia.com/gpu (ours)", "ok    cdi /etc/cdi/wsl-gpu-hook.dev-gpu.json: wsl-gpu-hook.dev/gpu (ours)"} {
				if code != 0 || !strings.Contains(out, w) {
					t.Errorf("doctor: exit %d, want 0 and %q", code, w)
				}
			}
		default:
			o.chroot(t, sim, s.argv...)
		}
	}
	cdiDir := filepath.Join(o.upper, "etc/cdi")
	specs := listFiles(t, cdiDir)
	if len(specs) != 2 {
		t.Fatalf("install cdi wrote %v, want the NVIDIA and wsl-gpu-hook.dev specs", keysOf(specs))
	}
	t.Run("CDI names resolve", func(t *testing.T) { resolves(t, o, cdiDir) })

	// The administrator's edit, and specs an older version wrote.
	config := filepath.Join(o.upper, "etc/wsl-gpu-hook/config.toml")
	edited := string(must(os.ReadFile(config))) + "# the administrator's line\n"
	o.write(t, "etc/wsl-gpu-hook/config.toml", edited)
	for f, data := range specs {
		o.write(t, "etc/cdi"+f, "# written by an older wsl-gpu-hook\n"+data)
	}
	out := o.rpm(t, sim, "-U", cur)
	if !strings.Contains(out, "wsl-gpu-hook: regenerated the CDI specs (/usr/bin/wsl-gpu-hook cdi generate") {
		t.Errorf("%%post on upgrade did not say it regenerated the specs:\n%s", out)
	}
	wantSame(t, "/etc/cdi after the upgrade", specs, listFiles(t, cdiDir))
	if got := string(must(os.ReadFile(config))); got != edited {
		t.Errorf("config.toml after the upgrade:\n%s\nwant the administrator's:\n%s", got, edited)
	}
	if got := o.rpm(t, nil, "-q", "wsl-gpu-hook"); got != "wsl-gpu-hook-0.2.0-1.x86_64\n" {
		t.Errorf("rpm -q after the upgrade: %q", got)
	}

	// What the hook leaves at run time; then the erase.
	if err := os.RemoveAll(filepath.Join(o.upper, "usr/lib/wsl")); err != nil {
		t.Fatal(err)
	}
	o.write(t, "var/log/wsl-gpu-hook.log", `time="2026-11-23T03:00:00Z" level=info msg="gave the GPU"`+"\n")
	o.write(t, "var/cache/wsl-gpu-hook/sonames-0123456789abcdef.bin", "WSLGPUSN")
	out = o.rpm(t, nil, "-e", "wsl-gpu-hook")
	t.Logf("rpm -e:\n%s", out)
	erased := o.snapshot(t)
	wantSame(t, "engine configuration after erase", before.engines, erased.engines)
	wantSame(t, "files after erase (the edited config.toml stays, as .rpmsave)", withKept(before.files, erased.files,
		"etc/wsl-gpu-hook", "etc/wsl-gpu-hook/config.toml.rpmsave"), erased.files)
	if _, err := os.Lstat(filepath.Join(o.upper, "var/cache/wsl-gpu-hook")); err == nil {
		t.Error("/var/cache/wsl-gpu-hook stays after the erase")
	}
}

// step is one task of the podman machine playbook: the rpm's install (its
// dnf task), a unit enabled (its systemd task), or a command.
type step struct {
	install bool
	enable  string
	argv    []string
}

// playbook reads the tasks of packaging/podman-machine's playbook, line
// by line (the file is plain enough; the main module has no YAML
// library of its own), and insists they are the ones this test runs.
func playbook(t *testing.T, path string) []step {
	t.Helper()
	var steps []step
	var module string
	for _, line := range strings.Split(string(must(os.ReadFile(path))), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "ansible.builtin.dnf:":
			steps = append(steps, step{install: true})
		case line == "ansible.builtin.systemd:":
			module = "systemd"
		case strings.HasPrefix(line, "ansible.builtin.command: "):
			steps = append(steps, step{argv: strings.Fields(strings.TrimPrefix(line, "ansible.builtin.command: "))})
		case module == "systemd" && strings.HasPrefix(line, "name: "):
			steps = append(steps, step{enable: strings.TrimPrefix(line, "name: ")})
			module = ""
		}
	}
	want := []step{{install: true}, {argv: []string{"wsl-gpu-hook", "install", "cdi"}}, {enable: "wsl-gpu-hook-cdi.service"}, {argv: []string{"wsl-gpu-hook", "doctor"}}}
	if fmt.Sprint(steps) != fmt.Sprint(want) {
		t.Fatalf("%s has the steps %v, this test runs %v: change both", path, steps, want)
	}
	return steps
}

// containersCommon builds a stand-in for Fedora's containers-common: the
// directories of it that the wsl-gpu-hook rpm co-owns, so an erase must
// leave them.
func containersCommon(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	spec := `Name: containers-common
Version: 0
Release: 1
Summary: Stand-in for the directories of Fedora's containers-common
License: Apache-2.0
BuildArch: noarch
%description
The directories of containers-common that wsl-gpu-hook's rpm co-owns (test/packages).
%install
mkdir -p %{buildroot}/usr/share/containers/oci/hooks.d %{buildroot}/etc/containers
%files
%dir /usr/share/containers
%dir /usr/share/containers/oci
%dir /usr/share/containers/oci/hooks.d
%dir /etc/containers
`
	if err := os.WriteFile(filepath.Join(dir, "cc.spec"), []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, dir, nil, "rpmbuild", "--quiet", "--define", "_topdir "+dir, "-bb", "cc.spec")
	return filepath.Join(dir, "RPMS/noarch/containers-common-0-1.noarch.rpm")
}

// resolves loads the root's /etc/cdi as podman does (the CDI library's
// cache, the code podman links) and checks the names `podman run --gpus
// all` and `--device` ask for: each resolves, and its hooks run the
// binary the rpm installed. (Injecting them would stat /dev/dxg on this
// machine, which has none.)
func resolves(t *testing.T, o *overlay, dir string) {
	cache, err := cdi.NewCache(cdi.WithSpecDirs(dir), cdi.WithAutoRefresh(false))
	if err != nil {
		t.Fatal(err)
	}
	if errs := cache.GetErrors(); len(errs) > 0 {
		t.Fatalf("the CDI specs do not load: %v", errs)
	}
	for _, name := range []string{"nvidia.com/gpu=all", "wsl-gpu-hook.dev/gpu=all", "nvidia.com/gpu=0"} {
		d := cache.GetDevice(name)
		if d == nil {
			t.Errorf("%s does not resolve; the cache has %v", name, cache.ListDevices())
			continue
		}
		hooks := append(append([]*cdispec.Hook{}, d.ContainerEdits.Hooks...), d.GetSpec().ContainerEdits.Hooks...)
		if len(hooks) == 0 {
			t.Errorf("%s: no hook", name)
		}
		for _, h := range hooks {
			if fi, err := os.Stat(filepath.Join(o.upper, h.Path)); err != nil || fi.Mode()&0o111 == 0 {
				t.Errorf("%s: the hook %s is not an executable the rpm installed: %v", name, h.Path, err)
			}
		}
	}
}

// rpm runs the host's rpm on the root (--root chroots its scriptlets
// into it, with /proc mounted), under wrap when given; it fails the test
// on a non-zero exit.
func (o *overlay) rpm(t *testing.T, wrap []string, args ...string) string {
	t.Helper()
	cmd := append(append([]string{}, wrap...), o.in(`mount -t proc proc "$m/proc"; exec rpm --root "$m" --dbpath /`+rpmDB+` "$@"`, args...)...)
	code, out := runCode(t, "", nil, cmd...)
	if code != 0 {
		t.Fatalf("rpm %s: exit %d\n%s", strings.Join(args, " "), code, out)
	}
	return out
}

// symlink makes a link in the root (through the upper layer).
func (o *overlay) symlink(t *testing.T, target, p string) {
	t.Helper()
	full := filepath.Join(o.upper, p)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, full); err != nil {
		t.Fatal(err)
	}
}

// fedoraRoot lays out dir as a Fedora system is (merged /usr, the
// directories its filesystem, systemd and containers-common packages own,
// among them podman's hooks.d and /etc/cdi), with Debian's static busybox
// as /bin/sh and the tools the scriptlets call, and an empty rpm database
// place; no package is in it, so the rpm's scriptlets run with only what
// the package itself needs.
func fedoraRoot(t *testing.T, dir string) string {
	t.Helper()
	for _, d := range []string{"usr/bin", "usr/sbin", "usr/lib", "usr/lib64", "usr/libexec", "usr/lib/systemd/system",
		"usr/share/man/man1", "usr/share/doc", "usr/share/licenses",
		"etc/systemd/system/multi-user.target.wants", "etc/cdi", "var/log", "var/cache", "var/lib", "var/tmp", "tmp",
		"run", "proc", "dev", "root", rpmDB} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{"bin": "usr/bin", "sbin": "usr/sbin", "lib": "usr/lib", "lib64": "usr/lib64", "var/run": "../run"} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	for p, data := range map[string]string{
		"etc/os-release": "NAME=\"Fedora Linux\"\nID=fedora\nVERSION_ID=43\n# a Fedora-shaped test root (test/packages)\n",
		"etc/passwd":     "root:x:0:0:root:/root:/bin/sh\n",
		"etc/group":      "root:x:0:\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, p), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	busybox := must(exec.LookPath("busybox"))
	run(t, "", nil, "cp", busybox, filepath.Join(dir, "usr/bin/busybox"))
	for _, applet := range strings.Fields(run(t, "", nil, busybox, "--list")) {
		p := filepath.Join(dir, "usr/bin", applet)
		if _, err := os.Lstat(p); err == nil {
			continue
		}
		if err := os.Symlink("busybox", p); err != nil {
			t.Fatal(err)
		}
	}
	run(t, "", nil, "mknod", "-m", "0666", filepath.Join(dir, "dev/null"), "c", "1", "3")
	if err := os.Chmod(filepath.Join(dir, "tmp"), 0o1777); err != nil {
		t.Fatal(err)
	}
	return dir
}

// buildPackage builds one package with hack/packages.sh; version, when
// given, stands for git describe.
func buildPackage(t *testing.T, repo, out, arch, format, version string) string {
	t.Helper()
	env := os.Environ()
	if version != "" {
		env = append(env, "VERSION="+version)
	}
	return strings.TrimSpace(run(t, repo, env, "./hack/packages.sh", out, arch, format))
}

// rpmlint fails on every message packaging/rpm/rpmlint.toml does not
// waive. nfpm's payload names files by absolute paths, which rpmlint's
// `rpm2cpio | cpio -id` would write to this machine's / (as it did once
// here): cpio runs with --no-absolute-filenames through a wrapper first
// on PATH.
func rpmlint(t *testing.T, repo, pkg string) {
	t.Helper()
	dir := t.TempDir()
	wrapper := "#!/bin/sh\nexec " + must(exec.LookPath("cpio")) + " --no-absolute-filenames \"$@\"\n"
	if err := os.WriteFile(filepath.Join(dir, "cpio"), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "PATH="+dir+":"+os.Getenv("PATH"), "TMPDIR="+dir)
	code, out := runCode(t, dir, env, "rpmlint", "-c", filepath.Join(repo, "packaging/rpm/rpmlint.toml"), pkg)
	if code != 0 || !strings.Contains(out, "0 errors, 0 warnings") {
		t.Errorf("rpmlint %s: exit %d\n%s", filepath.Base(pkg), code, out)
	}
}
