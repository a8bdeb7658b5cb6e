package wrapper

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/config"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/fixture"
)

// TestPatchBundleStack: the wrapper puts the capabilities' variables into
// process.env, and leaves what the container set itself.
func TestPatchBundleStack(t *testing.T) {
	wslg := filepath.Join(t.TempDir(), "wslg")
	fixture.Tree(t, wslg, "socket .X11-unix/X0")
	cfg := config.Default()
	cfg.DxgDevice = "/dev/null"
	cfg.WSLgDir = wslg
	cfg.ROCmDir = filepath.Join(t.TempDir(), "no-rocm")
	o := Options{Config: cfg, Self: "/usr/bin/wsl-gpu-hook"}
	tests := []struct {
		name string
		env  string
		want []string
	}{
		{"display", `"WSL_GPU_DEVICES=all","WSL_GPU_CAPABILITIES=display"`,
			[]string{"WSL_GPU_DEVICES=all", "WSL_GPU_CAPABILITIES=display", "DISPLAY=:0"}},
		{"the user's DISPLAY wins", `"WSL_GPU_DEVICES=all","WSL_GPU_CAPABILITIES=display","DISPLAY=:5"`,
			[]string{"WSL_GPU_DEVICES=all", "WSL_GPU_CAPABILITIES=display", "DISPLAY=:5"}},
		{"video from NVIDIA's variable, no /dev/dri here", `"NVIDIA_VISIBLE_DEVICES=all","NVIDIA_DRIVER_CAPABILITIES=compute,video"`,
			[]string{"NVIDIA_VISIBLE_DEVICES=all", "NVIDIA_DRIVER_CAPABILITIES=compute,video", "LIBVA_DRIVER_NAME=d3d12"}},
		{"no capability, nothing", `"WSL_GPU_DEVICES=all"`, []string{"WSL_GPU_DEVICES=all"}},
		// The enumeration fails on /dev/null: the hook will say why.
		{"a narrower request where the host cannot be enumerated", `"WSL_GPU_DEVICES=0","WSL_GPU_CAPABILITIES=display"`,
			[]string{"WSL_GPU_DEVICES=0", "WSL_GPU_CAPABILITIES=display", "DISPLAY=:0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := bundle(t, tt.env)
			if err := PatchBundle(b, o); err != nil {
				t.Fatal(err)
			}
			data, _ := os.ReadFile(filepath.Join(b, "config.json"))
			var s struct{ Process struct{ Env []string } }
			if err := json.Unmarshal(data, &s); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(s.Process.Env, tt.want) {
				t.Errorf("env %q, want %q", s.Process.Env, tt.want)
			}
		})
	}
	t.Run("a bad capability is an error", func(t *testing.T) {
		b := bundle(t, `"WSL_GPU_DEVICES=all","WSL_GPU_CAPABILITIES=gui"`)
		if err := PatchBundle(b, o); err == nil {
			t.Fatal("PatchBundle accepted WSL_GPU_CAPABILITIES=gui")
		}
	})
}
