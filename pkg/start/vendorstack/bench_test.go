package vendorstack

import (
	"testing"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/capability"
)

// The plan the hook makes at a start (the probes: package stackprobe).
func BenchmarkPlanAMDVideoDisplay(b *testing.B) {
	in := Input{Host: []Adapter{radeon}, Selected: []Adapter{radeon}, Caps: capability.Compute | capability.Video | capability.Display,
		Probe: Host{ROCm: rocm, DRI: dri, WSLg: wslg}}
	for b.Loop() {
		Plan(in)
	}
}
