package engines

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/fixture"
)

// TestPodmanVendorStacks runs podman's own CDI injection of our specs on
// the simulated AMD desktop: amd.com/gpu gives ROCm's librocdxg and its
// variable, and the video and display devices give /dev/dri and WSLg.
func TestPodmanVendorStacks(t *testing.T) {
	e := setup(t)
	if _, err := exec.LookPath("podman"); err != nil {
		t.Skip("podman not installed")
	}
	const amdProfile = "amd-desktop"
	dir := t.TempDir()
	host := fixture.Host(t, amdProfile, fixture.Options{DeviceNodes: true})
	dev := filepath.Join(dir, "dxg")
	config := filepath.Join(dir, "config.toml")
	cfg := fixture.Config{Dxg: dev, Host: host, LogFile: filepath.Join(dir, "hook.log"), LogLevel: "debug", Vendors: true}
	if err := cfg.Write(config); err != nil {
		t.Fatal(err)
	}
	specDir := filepath.Join(dir, "cdi")
	for _, kind := range []string{"wsl-gpu-hook.dev/gpu", "amd.com/gpu"} {
		out := filepath.Join(specDir, strings.NewReplacer("/", "_").Replace(kind)+".json")
		if o, err := run(t, []string{"WSL_GPU_HOOK_CONFIG=" + config}, e.sim, "--profile", amdProfile, "--dev", dev, "--",
			e.hook, "cdi", "generate", "--kind", kind, "--output", out); err != nil {
			t.Fatalf("cdi generate --kind %s: %v\n%s", kind, err, o)
		}
	}
	rocprobe := filepath.Join(dir, "rocprobe")
	if out, err := exec.Command("gcc", "-O2", "-o", rocprobe, "../../hack/rocprobe.c", "-ldl").CombinedOutput(); err != nil {
		t.Fatalf("gcc rocprobe: %v\n%s", err, out)
	}
	podmanAMD := func(t *testing.T, args ...string) (string, error) {
		script := `set -e
mount -t tmpfs tmpfs /run
mkdir -p /run/cdi
cp "$CDI_DIR"/* /run/cdi/
exec podman "$@"`
		base := []string{
			"--root", filepath.Join(dir, "storage"), "--runroot", "/run/podman-test",
			"--runtime", "runc", "--cgroup-manager", "cgroupfs", "--events-backend", "none",
		}
		all := append([]string{"--profile", amdProfile, "--dev", dev, "--", "unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh"}, base...)
		return run(t, []string{"PATH=" + e.bin + ":" + os.Getenv("PATH"), "CDI_DIR=" + specDir}, e.sim, append(all, args...)...)
	}
	tests := []struct {
		name    string
		devices []string
		script  string
		want    []string
	}{
		{"amd.com/gpu=all", []string{"amd.com/gpu=all"}, "rocprobe",
			[]string{"loaded librocdxg.so.1 from /usr/lib/librocdxg.so.1", "dids.conf: " + fixture.Dids, "hsaKmtOpenKFD() = 0"}},
		{"video", []string{"wsl-gpu-hook.dev/gpu=all", "wsl-gpu-hook.dev/gpu=video"},
			": <> /dev/dri/renderD128 && echo render-open; echo LIBVA=$LIBVA_DRIVER_NAME",
			[]string{"render-open", "LIBVA=d3d12"}},
		{"display", []string{"wsl-gpu-hook.dev/gpu=all", "wsl-gpu-hook.dev/gpu=display"},
			"test -S /tmp/.X11-unix/X0 && echo x11-socket; echo DISPLAY=$DISPLAY WAYLAND=$WAYLAND_DISPLAY",
			[]string{"x11-socket", "DISPLAY=:0 WAYLAND=wayland-0"}},
		{"all without capabilities", []string{"wsl-gpu-hook.dev/gpu=all"},
			"ls /dev/dri 2>&1; echo LIBVA=$LIBVA_DRIVER_NAME DISPLAY=$DISPLAY",
			[]string{"No such file or directory", "LIBVA= DISPLAY="}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rootfs := filepath.Join(t.TempDir(), "rootfs")
			if out, err := exec.Command("cp", "-a", e.rootfs, rootfs).CombinedOutput(); err != nil {
				t.Fatalf("copy rootfs: %v %s", err, out)
			}
			if out, err := exec.Command("cp", rocprobe, filepath.Join(rootfs, "usr/local/bin/rocprobe")).CombinedOutput(); err != nil {
				t.Fatalf("copy rocprobe: %v %s", err, out)
			}
			args := []string{"run", "--rm", "--network", "none", "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024"}
			for _, d := range tt.devices {
				args = append(args, "--device", d)
			}
			out, err := podmanAMD(t, append(args, "--rootfs", rootfs, "sh", "-c", tt.script)...)
			if err != nil {
				log, _ := os.ReadFile(filepath.Join(dir, "hook.log"))
				t.Fatalf("podman: %v\n%s\nhook log:\n%s", err, out, tail(string(log), 10))
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}
