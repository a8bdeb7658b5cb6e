package vendorstack

import (
	"path/filepath"
	"testing"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/capability"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/fixture"
)

// What the hook adds to every container start: the probes a request needs
// and the plan. Compare BenchmarkProbeForNVIDIA (nothing to probe) with
// BenchmarkProbeForAMD (librocdxg behind two links, as ROCm installs it).
func benchTree(b *testing.B) ProbeOptions {
	root := b.TempDir()
	fixture.Tree(b, root, "symlink opt/rocm rocm-7.2.0", "file opt/rocm-7.2.0/lib/librocdxg.so.1.2.0 x",
		"symlink opt/rocm-7.2.0/lib/librocdxg.so.1 librocdxg.so.1.2.0", "file opt/rocm-7.2.0/share/rocdxg/dids.conf x")
	return ProbeOptions{ROCmDir: filepath.Join(root, "opt/rocm"), DRIDir: filepath.Join(root, "dev/dri"), WSLgDir: filepath.Join(root, "mnt/wslg")}
}

func BenchmarkProbeForNVIDIA(b *testing.B) {
	o := benchTree(b)
	host := []Adapter{iris, rtx}
	for b.Loop() {
		if _, err := ProbeFor(o, host, capability.Compute); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkProbeForAMD(b *testing.B) {
	o := benchTree(b)
	host := []Adapter{radeon}
	for b.Loop() {
		if h, err := ProbeFor(o, host, capability.Compute); err != nil || h.ROCm.Lib == "" {
			b.Fatal(err, h)
		}
	}
}

func BenchmarkPlanAMDVideoDisplay(b *testing.B) {
	in := Input{Host: []Adapter{radeon}, Selected: []Adapter{radeon}, Caps: capability.Compute | capability.Video | capability.Display,
		Probe: Host{ROCm: rocm, DRI: dri, WSLg: wslg}}
	for b.Loop() {
		Plan(in)
	}
}
