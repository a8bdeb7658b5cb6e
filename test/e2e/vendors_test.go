package e2e

import (
	"strings"
	"testing"
)

// TestCDIAndWrapperPaths runs an NVIDIA request through the two paths that
// can set a container's environment: CDI devices injected as an engine
// does, and the wsl-gpu-runtime wrapper.
func TestCDIAndWrapperPaths(t *testing.T) {
	env(t)
	t.Parallel()
	sim := &simulation{profile: "nvidia-laptop"}
	tests := []struct {
		name string
		b    box
	}{
		{"cdi", box{image: imageDebian, sim: sim, cdi: []string{"wsl-gpu-hook.dev/gpu=all"}}},
		{"wrapper", box{image: imageDebian, sim: sim, wrapper: true, env: []string{"WSL_GPU_DEVICES=all"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.b.checks = []check{{"cudaprobe", "cudaprobe"}, {"env", "env"}}
			o := runBox(t, tt.b)
			o.started(t)
			if out := o.succeeds(t, "cudaprobe"); !strings.Contains(out, "cuInit(0) = 0") {
				t.Errorf("cudaprobe:\n%s", out)
			}
			if !strings.Contains(o.hookLog, "GPU ready") {
				t.Errorf("the hook did not run:\n%s", o.debug())
			}
		})
	}
}
