package deviceplugin

import (
	"testing"
)

func TestFeatures(t *testing.T) {
	head := "# Written by wsl-gpu-device-plugin; node-feature-discovery's local source reads it.\n"
	tests := []struct {
		profile string
		want    string
	}{
		{"nvidia-laptop", head + `wsl-gpu-hook.adapters=2
wsl-gpu-hook.compute-only=false
wsl-gpu-hook.intel.compute-only=false
wsl-gpu-hook.intel.count=1
wsl-gpu-hook.intel.wddm=3.0
wsl-gpu-hook.nvidia.compute-only=false
wsl-gpu-hook.nvidia.count=1
wsl-gpu-hook.nvidia.wddm=3.0
wsl-gpu-hook.present=true
wsl-gpu-hook.vendors=intel.nvidia
wsl-gpu-hook.wddm=3.0
`},
		{"intel-npu", head + `wsl-gpu-hook.adapters=2
wsl-gpu-hook.compute-only=true
wsl-gpu-hook.intel.compute-only=true
wsl-gpu-hook.intel.count=2
wsl-gpu-hook.intel.wddm=3.1
wsl-gpu-hook.present=true
wsl-gpu-hook.vendors=intel
wsl-gpu-hook.wddm=3.1
`},
		{"no-gpu", head + "wsl-gpu-hook.adapters=0\nwsl-gpu-hook.present=false\n"},
	}
	for _, tt := range tests {
		h := newHost(t, tt.profile)
		if got := Features(h.inventory(t)); got != tt.want {
			t.Errorf("%s: feature file\n%s\nwant\n%s", tt.profile, got, tt.want)
		}
	}
	if got := Features(nil); got != head+"wsl-gpu-hook.adapters=0\nwsl-gpu-hook.present=false\n" {
		t.Errorf("no inventory: %q", got)
	}
}
