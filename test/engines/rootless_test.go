package engines

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/fixture"
)

// rootlessUser is the account hack/setup.sh makes (with subordinate ids)
// for rootless podman.
const rootlessUser = "wsl-gpu-rootless"

// rootless is one user's rootless podman on the simulated host.
type rootless struct {
	e        *env
	uid, gid int
	home     string // HOME, XDG_RUNTIME_DIR and podman's storage, the user's
	hooksDir string
}

func newRootless(t *testing.T, e *env) *rootless {
	t.Helper()
	if _, err := exec.LookPath("podman"); err != nil {
		t.Skip("podman not installed")
	}
	u, err := user.Lookup(rootlessUser)
	if err != nil {
		msg := fmt.Sprintf("no user %s with subordinate ids: run hack/setup.sh (make test does)", rootlessUser)
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	r := &rootless{e: e}
	r.uid, _ = strconv.Atoi(u.Uid)
	r.gid, _ = strconv.Atoi(u.Gid)
	// The hook, its config, the fixture and the node live under e.dir,
	// which MkdirTemp made 0700: the user's runtime must reach them.
	if err := os.Chmod(e.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	r.home = r.ownedDir(t)
	r.hooksDir = filepath.Join(r.home, "hooks.d")
	// XDG_RUNTIME_DIR must exist, private to the user, or podman falls
	// back to /tmp/podman-run-UID on the host.
	run := filepath.Join(r.home, "run")
	if err := os.Mkdir(run, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(run, r.uid, r.gid); err != nil {
		t.Fatal(err)
	}
	return r
}

// ownedDir makes a scratch directory belonging to the user.
func (r *rootless) ownedDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "wsl-gpu-rootless-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chown(dir, r.uid, r.gid); err != nil {
		t.Fatal(err)
	}
	return dir
}

// config writes a hook config for the fixture host and returns its path;
// the log goes where the user's hook can write it.
func (r *rootless) config(t *testing.T, host, logFile string) string {
	t.Helper()
	p := filepath.Join(r.ownedDir(t), "config.toml")
	cfg := fixture.Config{Dxg: r.e.dev, Host: host, LogFile: logFile, LogLevel: "debug"}
	if err := cfg.Write(p); err != nil {
		t.Fatal(err)
	}
	return p
}

// rootfs copies the image into a directory the user owns, as rootless
// storage holds images.
func (r *rootless) rootfs(t *testing.T) string {
	t.Helper()
	dst := filepath.Join(r.ownedDir(t), "rootfs")
	for _, c := range [][]string{{"cp", "-a", r.e.rootfs, dst}, {"chown", "-R", fmt.Sprintf("%d:%d", r.uid, r.gid), dst}} {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v %s", strings.Join(c, " "), err, out)
		}
	}
	return dst
}

// podman runs `podman ARGS` as the user under dxgsim. As root, before it
// drops to the user, the wrapper puts a tmpfs on /run in a private mount
// namespace and the CDI spec into /run/cdi, where podman looks. With a
// CDI spec the simulated host sits at the real WSL paths (dxgsim
// --bind-host): a rootless runc binds a spec's device from the host path
// of the same name.
func (r *rootless) podman(t *testing.T, cdiSpec, nodeMode string, args ...string) (string, error) {
	t.Helper()
	script := `set -e
mount -t tmpfs tmpfs /run
mkdir -p /run/cdi
if [ -n "$CDI_SPEC" ]; then cp "$CDI_SPEC" /run/cdi/; fi
if [ -n "$DXG_MODE" ]; then chmod "$DXG_MODE" "$DXG_NODE"; fi
exec setpriv --reuid "$RUID" --regid "$RUID" --init-groups env HOME="$RHOME" XDG_RUNTIME_DIR="$RHOME/run" XDG_CONFIG_HOME="$RHOME/config" podman "$@"`
	base := []string{
		"--root", filepath.Join(r.home, "storage"), "--runroot", filepath.Join(r.home, "runroot"),
		"--runtime", "runc", "--cgroup-manager", "cgroupfs", "--events-backend", "none",
		"--hooks-dir", r.hooksDir,
	}
	simArgs := []string{"--profile", profile, "--dev", r.e.dev}
	if cdiSpec != "" {
		simArgs = append(simArgs, "--bind-host", r.e.hostDir)
	}
	simArgs = append(simArgs, "--", "unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh")
	env := []string{
		"PATH=" + r.e.bin + ":" + os.Getenv("PATH"), "CDI_SPEC=" + cdiSpec, "RUID=" + rootlessUser, "RHOME=" + r.home,
		"DXG_MODE=" + nodeMode, "DXG_NODE=" + r.e.dev,
	}
	out, err := run(t, env, r.e.sim, append(append(simArgs, base...), args...)...)
	r.stopPause()
	return out, err
}

// stopPause ends the process rootless podman leaves running to hold its
// user namespace, so no process of the test outlives it.
func (r *rootless) stopPause() {
	data, err := os.ReadFile(filepath.Join(r.home, "run/libpod/tmp/pause.pid"))
	if err != nil {
		return
	}
	if pid, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil && pid > 1 {
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

// TestPodmanRootless runs podman as an ordinary user, the default on
// developer machines: the hook runs inside podman's user namespace, as
// that user on the host. It must give the container a working GPU, or
// fail the start with one line; it never changes the host.
func TestPodmanRootless(t *testing.T) {
	e := setup(t)
	r := newRootless(t, e)

	// A second host tree whose NVIDIA driver folder only root can read:
	// a rootless container could not load that driver.
	locked := filepath.Join(e.dir, "host-locked")
	if out, err := exec.Command("cp", "-a", e.hostDir, locked).CombinedOutput(); err != nil {
		t.Fatalf("copy host tree: %v %s", err, out)
	}
	t.Cleanup(func() { os.RemoveAll(locked) })
	if err := os.Chmod(filepath.Join(locked, "usr/lib/wsl/drivers", e.nvidia), 0o700); err != nil {
		t.Fatal(err)
	}

	logDir := r.ownedDir(t)
	logFile := filepath.Join(logDir, "hook.log")
	cfg := r.config(t, e.hostDir, logFile)
	lockedCfg := r.config(t, locked, logFile)

	if err := os.MkdirAll(r.hooksDir, 0o755); err != nil {
		t.Fatal(err)
	}
	// The spec as `cdi generate` writes it on a WSL host: default paths.
	spec := filepath.Join(r.ownedDir(t), "wsl-gpu-hook.json")
	if out, err := run(t, nil, e.sim, "--profile", profile, "--bind-host", e.hostDir, "--", e.hook, "cdi", "generate", "--output", spec); err != nil {
		t.Fatalf("cdi generate: %v\n%s", err, out)
	}

	mountsBefore := hostWSLMounts(t)
	tests := []struct {
		name    string
		args    []string
		cdi     bool
		node    string // the simulated node's mode, if not 0666
		config  string
		folders []string // the container starts with these folders
		wantErr string   // or fails with one hook line containing this
		wantLog string
	}{
		{name: "hooks.d annotation all", args: []string{"--annotation", "wsl-gpu-hook/devices=all"}, config: cfg,
			folders: []string{e.intel, e.nvidia}, wantLog: "rootless engine"},
		{name: "CDI all", args: []string{"--device", "wsl-gpu-hook.dev/gpu=all"}, cdi: true, config: cfg, folders: []string{e.intel, e.nvidia}},
		{name: "unreadable NVIDIA folder, all asked", args: []string{"--annotation", "wsl-gpu-hook/devices=all"}, config: lockedCfg,
			folders: []string{e.intel}, wantLog: "is not readable by everyone (mode 0700)"},
		{name: "unreadable NVIDIA folder, nvidia asked", args: []string{"--annotation", "wsl-gpu-hook/devices=nvidia"}, config: lockedCfg,
			wantErr: "is not readable by everyone (mode 0700), so a container whose user is not host root could not load the driver from it"},
		{name: "node only root may open", args: []string{"--annotation", "wsl-gpu-hook/devices=all"}, config: cfg, node: "0600",
			wantErr: "the GPU device is not accessible to this user: run as root or make /dev/dxg mode 0666"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			os.Truncate(logFile, 0)
			hooksFile := shippedHooksFile(t, e.hook, tt.config)
			if err := os.WriteFile(filepath.Join(r.hooksDir, "wsl-gpu-hook.json"), hooksFile, 0o644); err != nil {
				t.Fatal(err)
			}
			args := append([]string{"run", "--rm", "--network", "none"}, tt.args...)
			args = append(args, "--rootfs", r.rootfs(t), "sh", "-c", inside)
			cdiSpec := ""
			if tt.cdi {
				cdiSpec = spec
			}
			out, err := r.podman(t, cdiSpec, tt.node, args...)
			log, _ := os.ReadFile(logFile)
			if tt.wantErr != "" {
				line := grepLines(out, "wsl-gpu-hook: prestart: ")
				if err == nil || !strings.Contains(line, tt.wantErr) || strings.Count(line, "wsl-gpu-hook:") != 1 {
					t.Fatalf("want a failed start with one hook line containing %q, got %v:\n%s\nhook log:\n%s", tt.wantErr, err, out, tail(string(log), 10))
				}
				return
			}
			if err != nil {
				t.Fatalf("podman: %v\n%s\nhook log:\n%s", err, out, tail(string(log), 10))
			}
			checkGPU(t, out, strings.Contains(strings.Join(tt.folders, ","), e.nvidia), tt.folders...)
			if !strings.Contains(string(log), tt.wantLog) {
				t.Errorf("hook log lacks %q:\n%s", tt.wantLog, log)
			}
		})
	}
	if after := hostWSLMounts(t); after != mountsBefore {
		t.Errorf("WSL mounts leaked into the host:\n%s", after)
	}
	for _, p := range []string{"/run/cdi/wsl-gpu-hook.json", fmt.Sprintf("/tmp/podman-run-%d", r.uid)} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s appeared on the host", p)
		}
	}
}
