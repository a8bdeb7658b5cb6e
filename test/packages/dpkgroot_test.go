package packages

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/setup/cdiinstall"
)

// onWSL runs argv (a maintainer script) as on a WSL build host: in a
// mount namespace of its own whose /dev has a dxg (a stand-in file), so a
// script that asks the build host for /dev/dxg finds one, after setup (sh,
// ending in ";" or "&&") in that namespace. Unprivileged, the namespace
// is a user namespace's.
func onWSL(t *testing.T, env []string, setup string, argv ...string) (int, string) {
	t.Helper()
	ns := []string{"unshare", "--mount", "--propagation", "private"}
	if os.Geteuid() != 0 {
		ns = []string{"unshare", "--user", "--map-root-user", "--mount", "--propagation", "private"}
	}
	probe := exec.Command(ns[0], append(ns[1:], "true")...)
	if out, err := probe.CombinedOutput(); err != nil {
		t.Skipf("no mount namespace for the test (%v: %s): run it as root", err, out)
	}
	script := `mount -t tmpfs tmpfs /dev && : >/dev/dxg && : >/dev/null && ` + setup + ` exec "$@"`
	cmd := exec.Command(ns[0], append(append(ns[1:], "sh", "-c", script, "sh"), argv...)...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), string(out)
	} else if err != nil {
		t.Fatal(err)
	}
	return 0, string(out)
}

// TestPostinstRunsOnlyItsOwnRefresh: an upgrade's postinst runs the
// refresh unit's ExecStart only when that is this system's own and runs
// the package's binary.
//   - Into another root (dpkg --root with --force-script-chrootless:
//     mmdebstrap) the scripts run on the build host with DPKG_ROOT set:
//     the target root's unit would run on the build host, as root,
//     against the build host's /dev/dxg and spec dirs. Nothing runs.
//   - A unit in /etc that runs another command (an administrator's edit,
//     a wsl-gpu-hook installed elsewhere) is systemd's to start, not a
//     package upgrade's.
//
// The unit names a command that leaves a marker; the script runs on a
// host with /dev/dxg (onWSL), so only the rule stops it.
func TestPostinstRunsOnlyItsOwnRefresh(t *testing.T) {
	touch, err := exec.LookPath("touch")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name     string
		dpkgRoot bool
		want     string // %s: the target root
	}{
		{"into another root", true, "wsl-gpu-hook: installed into %s: its CDI specs are regenerated at its first boot (wsl-gpu-hook-cdi.service)\n"},
		{"a unit that runs another command", false, "wsl-gpu-hook: /etc/systemd/system/wsl-gpu-hook-cdi.service runs another command than /usr/bin/wsl-gpu-hook: refresh the CDI specs with: sudo systemctl start wsl-gpu-hook-cdi\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			target := t.TempDir()
			marker := filepath.Join(t.TempDir(), "ran")
			unit := filepath.Join(target, cdiinstall.SystemUnitPath)
			if err := os.MkdirAll(filepath.Dir(unit), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(unit, []byte("[Service]\nType=oneshot\nExecStart="+touch+" "+marker+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			var env []string
			setup := ""
			if tt.dpkgRoot {
				env = []string{"DPKG_ROOT=" + target}
			} else {
				// This system's /etc/systemd/system, in the namespace only.
				if _, err := os.Stat("/etc/systemd/system"); err != nil {
					t.Skip("no /etc/systemd/system to mount over")
				}
				env = []string{"DPKG_ROOT="}
				setup = `mount -t tmpfs tmpfs /etc/systemd/system && cp "` + unit + `" /etc/systemd/system/ &&`
			}
			script := filepath.Join(moduleRoot(t), "packaging/scripts/deb/postinst")
			code, out := onWSL(t, env, setup, "sh", script, "configure", "0.0.9")
			t.Logf("postinst configure 0.0.9 %v:\n%s", env, out)
			if code != 0 {
				t.Errorf("postinst exit %d", code)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Errorf("postinst ran the unit's ExecStart (%s exists)", marker)
			}
			if want := strings.ReplaceAll(tt.want, "%s", target); out != want {
				t.Errorf("postinst said:\n%s\nwant:\n%s", out, want)
			}
		})
	}
}

// TestScriptsUnderDPKGRootStayInIt: a target root made by a bootstrapper
// has absolute symlinks (Debian's /var/run -> /run), which on the build
// host lead out of the root. Removing and purging the package there
// (prerm remove, postrm remove and purge with DPKG_ROOT) must follow them
// inside the root, as the chroot the scripts are written for would: the
// target's files of ours go, and the build host's, which the same links
// name when followed on the build host, stay. Here each absolute link
// names a scratch dir (standing for the build host's /run, /var/cache,
// ...) that exists both on the build host and, under the same path, in
// the target.
func TestScriptsUnderDPKGRootStayInIt(t *testing.T) {
	host := t.TempDir()   // the build host's dirs the links name
	target := t.TempDir() // the root dpkg works on
	spec := `{"cdiVersion": "0.5.0", "kind": "wsl-gpu-hook.dev/gpu", "devices": [{"name": "all", "containerEdits": {"hooks": [{"hookName": "createContainer", "path": "/usr/bin/wsl-gpu-hook"}]}}]}`
	// Ours by name and content, under each dir the target links to;
	// below the target's root, the target's own (all but the link,
	// which is the same on both sides).
	files := map[string]string{
		"/run/cdi/wsl-gpu-hook.dev-gpu.json":                         spec,
		"/run/cdi/nvidia.com-gpu_wsl-gpu-hook.json.wsl-gpu-hook.bak": spec,
		"/cache/wsl-gpu-hook/sonames-0123456789abcdef.bin":           "WSLGPUSN",
		"/log/wsl-gpu-hook.log":                                      "ours",
		"/wants/" + cdiinstall.UnitName:                              "-> /etc/systemd/system/" + cdiinstall.UnitName,
		"/local/bin/nvidia-container-runtime-hook":                   "-> /usr/bin/wsl-gpu-hook",
	}
	for _, base := range []string{host, filepath.Join(target, host)} {
		for p, data := range files {
			full := filepath.Join(base, p)
			if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
				t.Fatal(err)
			}
			var err error
			if to, ok := strings.CutPrefix(data, "-> "); ok {
				err = os.Symlink(to, full)
			} else {
				err = os.WriteFile(full, []byte(data), 0o644)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	// The target's links: absolute ones, and a relative one for /etc/cdi.
	links := map[string]string{
		"/var/run":   filepath.Join(host, "run"),
		"/var/cache": filepath.Join(host, "cache"),
		"/var/log":   filepath.Join(host, "log"),
		"/usr/local": filepath.Join(host, "local"),
		"/etc/systemd/system/multi-user.target.wants": filepath.Join(host, "wants"),
		"/etc/cdi": "../srv/cdi",
	}
	for p, to := range links {
		full := filepath.Join(target, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(to, full); err != nil {
			t.Fatal(err)
		}
	}
	etcCDI := filepath.Join(target, "srv/cdi/wsl-gpu-hook.dev-gpu.json")
	if err := os.MkdirAll(filepath.Dir(etcCDI), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(etcCDI, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}

	hostBefore := listFiles(t, host)
	root := moduleRoot(t)
	for _, s := range []struct{ script, arg string }{
		{"packaging/scripts/deb/prerm", "remove"}, {"packaging/scripts/deb/postrm", "remove"}, {"packaging/scripts/deb/postrm", "purge"},
	} {
		cmd := exec.Command("sh", filepath.Join(root, s.script), s.arg)
		cmd.Env = append(os.Environ(), "DPKG_ROOT="+target)
		out, err := cmd.CombinedOutput()
		t.Logf("%s %s with DPKG_ROOT:\n%s", s.script, s.arg, out)
		if err != nil {
			t.Fatalf("%s %s: %v", s.script, s.arg, err)
		}
	}
	wantSame(t, "the build host's files after the package's removal from another root", hostBefore, listFiles(t, host))
	after := listFiles(t, target)
	for p := range files {
		if _, ok := after[filepath.Join(host, p)]; ok {
			t.Errorf("the target's %s%s is still there: the scripts did not follow the target's links inside it", host, p)
		}
	}
	if _, err := os.Lstat(etcCDI); err == nil {
		t.Errorf("the target's /etc/cdi spec (through a relative link) is still there")
	}
}
