package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/testbin"
)

// TestArm64UnderQemu runs the arm64 build (make build GOARCH=arm64) on the
// simulated Snapdragon host under qemu-user, as far as qemu carries it.
// qemu-user passes an ioctl to the kernel only if its own table knows the
// number; the dxg numbers are not in it, so it answers them with ENOSYS
// before any system call and dxgsim sees none (its report counts no call).
// Every command that enumerates adapters (info, cdi generate, top, a
// prestart hook asked for a GPU) must then end in the one line that names
// the emulator, not in advice to update WSL; what needs no /dev/dxg runs:
// version, and a prestart hook with nothing requested, which exits 0 and
// writes nothing. The arm64 dxg calls themselves are checked by dxcore's
// wire test (make test-arm64).
func TestArm64UnderQemu(t *testing.T) {
	h := env(t)
	qemu, err := exec.LookPath("qemu-aarch64-static")
	if err != nil {
		t.Skip("qemu-aarch64-static is not installed: apt-get install qemu-user-static (hack/setup.sh does)")
	}
	t.Parallel()
	hook, err := testbin.HookFor(t.TempDir(), "arm64")
	if err != nil {
		t.Fatal(err)
	}
	ctl := filepath.Join(filepath.Dir(hook), "wsl-gpu-ctl")
	sim := need(t, "build dxgsim", h.dxgsim)
	host := h.needFixture(t, "snapdragon-x")

	const refused = "enumerate adapters on /dev/dxg: LX_DXENUMADAPTERS3: function not implemented: " +
		"the dxg ioctls never reached the kernel: an emulator (qemu-user) runs this binary and does not pass them on: run the build for this machine's architecture"

	// run starts argv under qemu under dxgsim on the Snapdragon host (the
	// fixture at /usr/lib/wsl, the simulated node at /dev/dxg) and returns
	// its exit code, stderr and the dxg calls dxgsim answered.
	run := func(t *testing.T, stdin []byte, argv ...string) (int, string, map[string]int) {
		t.Helper()
		report := filepath.Join(t.TempDir(), "report.json")
		cmd := exec.Command(sim, append([]string{"--profile", "snapdragon-x", "--bind-host", host, "--report", report, "--", qemu}, argv...)...)
		cmd.Stdin = bytes.NewReader(stdin)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		var r struct{ Calls map[string]int }
		data, err := os.ReadFile(report)
		if err != nil {
			t.Fatalf("dxgsim wrote no report (exit %d): %v\n%s", code, err, stderr.String())
		}
		if err := json.Unmarshal(data, &r); err != nil {
			t.Fatal(err)
		}
		if stdout.Len() != 0 && code != 0 {
			t.Errorf("stdout of a failed command: %q", stdout.String())
		}
		return code, strings.TrimSpace(stderr.String()), r.Calls
	}

	t.Run("version", func(t *testing.T) {
		out, err := exec.Command(qemu, hook, "version").CombinedOutput()
		if err != nil || !strings.HasPrefix(string(out), "wsl-gpu-hook ") {
			t.Fatalf("wsl-gpu-hook version under qemu: %v: %q", err, out)
		}
	})
	for _, tt := range []struct {
		argv  []string
		stage string // how the line names the command
	}{{[]string{"info"}, "info"}, {[]string{"cdi", "generate"}, "cdi generate"}, {[]string{"top", "--once"}, "top"}} {
		t.Run(tt.stage, func(t *testing.T) {
			code, stderr, calls := run(t, nil, append([]string{ctl, "--config", "/dev/null"}, tt.argv...)...)
			want := "wsl-gpu-ctl: " + tt.stage + ": " + refused
			if code != 1 || stderr != want {
				t.Errorf("exit %d, stderr:\n%s\nwant exit 1 and\n%s", code, stderr, want)
			}
			if len(calls) != 0 {
				t.Errorf("dxgsim answered %v: qemu passed dxg ioctls on", calls)
			}
		})
	}
	for _, tt := range []struct {
		name, env string
		code      int
		stderr    string
	}{
		{"prestart, nothing requested", "", 0, ""},
		{"prestart, qualcomm requested", "WSL_GPU_DEVICES=qualcomm", 1, "wsl-gpu-hook: prestart: " + refused},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			bundle := filepath.Join(dir, "bundle")
			if err := os.MkdirAll(filepath.Join(bundle, "rootfs"), 0o755); err != nil {
				t.Fatal(err)
			}
			env := []string{"PATH=/bin"}
			if tt.env != "" {
				env = append(env, tt.env)
			}
			spec, _ := json.Marshal(map[string]any{"ociVersion": "1.0.2", "root": map[string]string{"path": "rootfs"},
				"process": map[string]any{"args": []string{"sh"}, "cwd": "/", "env": env}})
			cfg := filepath.Join(dir, "hook.toml")
			files := map[string]string{
				filepath.Join(bundle, "config.json"): string(spec),
				cfg:                                  "log_file = " + strconv.Quote(filepath.Join(dir, "hook.log")) + "\nprobe_cache = \"\"\n",
			}
			for p, data := range files {
				if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			state, _ := json.Marshal(map[string]any{"ociVersion": "1.0.2", "id": "arm64", "status": "creating", "pid": os.Getpid(), "bundle": bundle})
			code, stderr, calls := run(t, state, hook, "--config", cfg, "prestart")
			if code != tt.code || stderr != tt.stderr {
				t.Errorf("exit %d, stderr %q; want exit %d, %q", code, stderr, tt.code, tt.stderr)
			}
			if len(calls) != 0 {
				t.Errorf("dxgsim answered %v: qemu passed dxg ioctls on", calls)
			}
			if rootfs, _ := os.ReadDir(filepath.Join(bundle, "rootfs")); len(rootfs) != 0 {
				t.Errorf("the hook wrote into the rootfs: %v", rootfs)
			}
		})
	}
}
