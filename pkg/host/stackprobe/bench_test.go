package stackprobe

import (
	"path/filepath"
	"testing"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/driverstore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/capability"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/vendorstack"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/fixture"
)

// What the hook adds to every container start: the probes a request needs
// and the plan. Compare BenchmarkProbeForNVIDIA (nothing to probe) with
// BenchmarkProbeForAMD (librocdxg behind two links, as ROCm installs it).
func benchTree(b *testing.B) Options {
	root := b.TempDir()
	fixture.Tree(b, root, "symlink opt/rocm rocm-7.2.0", "file opt/rocm-7.2.0/lib/librocdxg.so.1.2.0 x",
		"symlink opt/rocm-7.2.0/lib/librocdxg.so.1 librocdxg.so.1.2.0", "file opt/rocm-7.2.0/share/rocdxg/dids.conf x")
	return Options{ROCmDir: filepath.Join(root, "opt/rocm"), DRIDir: filepath.Join(root, "dev/dri"), WSLgDir: filepath.Join(root, "mnt/wslg")}
}

func BenchmarkProbeForNVIDIA(b *testing.B) {
	o := benchTree(b)
	host := []vendorstack.Adapter{{Index: 0, Vendor: driverstore.Intel}, {Index: 1, Vendor: driverstore.NVIDIA}}
	for b.Loop() {
		if _, err := For(o, host, capability.Compute); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkProbeForAMD(b *testing.B) {
	o := benchTree(b)
	host := []vendorstack.Adapter{{Index: 0, Vendor: driverstore.AMD}}
	for b.Loop() {
		if h, err := For(o, host, capability.Compute); err != nil || h.ROCm.Lib == "" {
			b.Fatal(err, h)
		}
	}
}
