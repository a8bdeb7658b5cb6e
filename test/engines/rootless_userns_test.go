package engines

import (
	"os"
	"path/filepath"
	"testing"
)

// TestPodmanRootlessUserns: rootless podman (4.3, Debian 12) with
// --userns=auto and --userns=keep-id gives the container a user namespace
// inside podman's own, whose root is not the user: the CDI hook then runs
// as a subordinate id and cannot read the user's bundle. Each cell checks
// from inside that the root is remapped and that the GPU works.
func TestPodmanRootlessUserns(t *testing.T) {
	e := setup(t)
	r := newRootless(t, e)
	if err := os.MkdirAll(r.hooksDir, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := r.config(t, e.hostDir, filepath.Join(r.ownedDir(t), "hook.log"))
	if err := os.WriteFile(filepath.Join(r.hooksDir, "wsl-gpu-hook.json"), shippedHooksFile(t, e.hook, cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	spec := filepath.Join(r.ownedDir(t), "wsl-gpu-hook.json")
	if out, err := run(t, nil, e.sim, "--profile", profile, "--bind-host", e.hostDir, "--", e.hook, "cdi", "generate", "--output", spec); err != nil {
		t.Fatalf("cdi generate: %v\n%s", err, out)
	}
	// --userns=auto sizes the namespace from an image in podman's storage.
	if out, err := r.podman(t, "", "", "import", e.imgTar, "wslgpu-test"); err != nil {
		t.Fatalf("podman import: %v\n%s", err, out)
	}
	mountsBefore := hostWSLMounts(t)
	rows := []gpuRow{
		{name: "--device wsl-gpu-hook.dev/gpu=all", args: []string{"--device", "wsl-gpu-hook.dev/gpu=all"}, folders: allGPUs},
		{name: "--device wsl-gpu-hook.dev/gpu=nvidia", args: []string{"--device", "wsl-gpu-hook.dev/gpu=nvidia"}, folders: nvidiaOnly},
		{name: "hooks.d annotation", args: []string{"--annotation", "wsl-gpu-hook/devices=all"}, folders: allGPUs},
	}
	for _, mode := range []string{"--userns=auto", "--userns=keep-id"} {
		t.Run(mode, func(t *testing.T) {
			for _, row := range rows {
				t.Run(row.name, func(t *testing.T) {
					args := append(append([]string{"run", "--rm", "--network", "none", mode}, row.args...), "wslgpu-test", "sh", "-c", remapped+inside)
					out, err := r.podman(t, spec, "", args...)
					if err != nil {
						t.Fatalf("podman: %v\n%s", err, out)
					}
					checkRemapped(t, out, -1)
					checkRow(t, e, out, row.folders(e))
				})
			}
		})
	}
	if after := hostWSLMounts(t); after != mountsBefore {
		t.Errorf("WSL mounts leaked into the host:\n%s", after)
	}
}
