package engines

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// podman runs `podman ARGS` under dxgsim with its storage in dir and, in a
// private mount namespace, a tmpfs on /run holding the CDI spec dir, so
// nothing podman or the spec writes lands on the host.
func podman(t *testing.T, e *env, dir, cdiSpec string, args ...string) (string, error) {
	t.Helper()
	script := `set -e
mount -t tmpfs tmpfs /run
mkdir -p /run/cdi
if [ -n "$CDI_SPEC" ]; then cp "$CDI_SPEC" /run/cdi/; fi
exec podman "$@"`
	base := []string{
		"--root", filepath.Join(dir, "storage"), "--runroot", "/run/podman-test",
		"--runtime", "runc", "--cgroup-manager", "cgroupfs", "--events-backend", "none",
		"--hooks-dir", filepath.Join(dir, "hooks.d"),
	}
	simArgs := []string{"--profile", profile, "--dev", e.dev, "--", "unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh"}
	all := append(append(simArgs, base...), args...)
	return run(t, []string{"PATH=" + e.bin + ":" + os.Getenv("PATH"), "CDI_SPEC=" + cdiSpec}, e.sim, all...)
}

// shippedHooksFile returns the hooks.d file install ships, pointed at the
// hook binary and its config.
func shippedHooksFile(t *testing.T, hook, config string) []byte {
	t.Helper()
	data, err := os.ReadFile("../../config/podman/wsl-gpu-hook.json")
	if err != nil {
		t.Fatal(err)
	}
	var file map[string]any
	if err := json.Unmarshal(data, &file); err != nil {
		t.Fatal(err)
	}
	h := file["hook"].(map[string]any)
	h["path"] = hook
	h["env"] = []string{"WSL_GPU_HOOK_CONFIG=" + config}
	data, err = json.Marshal(file)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestPodman runs Debian 12's podman 4.3 with runc: through the hooks.d
// file install ships, and through a CDI spec from `cdi generate`.
func TestPodman(t *testing.T) {
	e := setup(t)
	if _, err := exec.LookPath("podman"); err != nil {
		t.Skip("podman not installed")
	}
	dir := scratchDir(t)
	hooksDir := filepath.Join(dir, "hooks.d")
	if err := os.MkdirAll(hooksDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(hooksDir, "wsl-gpu-hook.json"), shippedHooksFile(t, e.hook, e.config), 0o644); err != nil {
		t.Fatal(err)
	}

	// The CDI spec, generated on the simulated host by the hook itself.
	spec := filepath.Join(dir, "wsl-gpu-hook.json")
	out, err := run(t, []string{"WSL_GPU_HOOK_CONFIG=" + e.config}, e.sim, "--profile", profile, "--dev", e.dev, "--", e.hook, "cdi", "generate", "--output", spec)
	if err != nil {
		t.Fatalf("cdi generate: %v\n%s", err, out)
	}
	mountsBefore := hostWSLMounts(t)
	limits := []string{"--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024"}
	tests := []struct {
		name    string
		args    []string
		folders []string
	}{
		{name: "hooks.d annotation all", args: []string{"--annotation", "wsl-gpu-hook/devices=all"}, folders: []string{e.intel, e.nvidia}},
		{name: "hooks.d annotation intel", args: []string{"--annotation", "wsl-gpu-hook/devices=intel"}, folders: []string{e.intel}},
		{name: "CDI all", args: []string{"--device", "wsl-gpu-hook.dev/gpu=all"}, folders: []string{e.intel, e.nvidia}},
		{name: "CDI nvidia", args: []string{"--device", "wsl-gpu-hook.dev/gpu=nvidia"}, folders: []string{e.nvidia}},
		// Both: hooks.d runs the hook (the annotation outranks the CDI
		// spec's WSL_GPU_DEVICES=void), which leaves the CDI container alone.
		{name: "CDI nvidia and hooks.d annotation all", args: []string{"--device", "wsl-gpu-hook.dev/gpu=nvidia", "--annotation", "wsl-gpu-hook/devices=all"}, folders: []string{e.nvidia}},
		{name: "no request", args: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rootfs := filepath.Join(t.TempDir(), "rootfs")
			if out, err := exec.Command("cp", "-a", e.rootfs, rootfs).CombinedOutput(); err != nil {
				t.Fatalf("copy rootfs: %v %s", err, out)
			}
			args := append(append([]string{"run", "--rm", "--network", "none"}, limits...), tt.args...)
			script := inside
			if tt.folders == nil {
				script = "ls /dev/dxg /usr/lib/wsl 2>&1; true"
			}
			args = append(args, "--rootfs", rootfs, "sh", "-c", script)
			out, err := podman(t, e, dir, spec, args...)
			if err != nil {
				log, _ := os.ReadFile(filepath.Join(e.dir, "hook.log"))
				t.Fatalf("podman: %v\n%s\nhook log:\n%s", err, out, tail(string(log), 10))
			}
			if tt.folders == nil {
				if !strings.Contains(out, "/dev/dxg: No such file or directory") || !strings.Contains(out, "/usr/lib/wsl: No such file or directory") {
					t.Fatalf("a container that asked for nothing got GPU files:\n%s", out)
				}
				return
			}
			checkGPU(t, out, slices.Contains(tt.folders, e.nvidia), tt.folders...)
		})
	}
	if after := hostWSLMounts(t); after != mountsBefore {
		t.Errorf("WSL mounts leaked into the host:\n%s", after)
	}
	for _, p := range []string{"/run/cdi/wsl-gpu-hook.json", "/run/podman-test"} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s appeared on the host", p)
		}
	}
}
