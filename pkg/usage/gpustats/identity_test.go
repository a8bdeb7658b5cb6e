package gpustats

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/driverstore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/dxcore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/adapterid"
)

// TestSampleIdentityByFolder: an adapter the host gives no known PCI
// vendor for is named in the metrics as driverstore.Build and adapterid
// name it for the device plugin, the DRA driver and info: NVIDIA when its
// driver store folder holds libcuda.so.1.1, and only then, never through a
// symlink or a folder outside the drivers dir.
func TestSampleIdentityByFolder(t *testing.T) {
	store := func(folder string) string {
		return `\SystemRoot\System32\DriverStore\FileRepository\` + folder
	}
	for _, tc := range []struct {
		name string
		tree func(t *testing.T, drivers, outside string) // makes folder "f.inf_amd64_1"
		path string                                      // the adapter's driver store path
		want string
	}{
		{"libcuda.so.1.1 in the folder", func(t *testing.T, drivers, _ string) {
			write(t, filepath.Join(drivers, "f.inf_amd64_1", "libcuda.so.1.1"))
		}, store("f.inf_amd64_1"), "nvidia-2520-3a5c17aa-0"},
		{"the folder in another case", func(t *testing.T, drivers, _ string) {
			write(t, filepath.Join(drivers, "f.inf_amd64_1", "libcuda.so.1.1"))
		}, store("F.INF_AMD64_1"), "nvidia-2520-3a5c17aa-0"},
		{"no marker", func(t *testing.T, drivers, _ string) {
			write(t, filepath.Join(drivers, "f.inf_amd64_1", "libd3d12core.so"))
		}, store("f.inf_amd64_1"), "unknown-2520-3a5c17aa-0"},
		{"the marker a symlink", func(t *testing.T, drivers, outside string) {
			write(t, filepath.Join(outside, "libcuda.so.1.1"))
			mkdir(t, filepath.Join(drivers, "f.inf_amd64_1"))
			if err := os.Symlink(filepath.Join(outside, "libcuda.so.1.1"), filepath.Join(drivers, "f.inf_amd64_1", "libcuda.so.1.1")); err != nil {
				t.Fatal(err)
			}
		}, store("f.inf_amd64_1"), "unknown-2520-3a5c17aa-0"},
		{"the folder a symlink out of the drivers dir", func(t *testing.T, drivers, outside string) {
			write(t, filepath.Join(outside, "libcuda.so.1.1"))
			mkdir(t, drivers)
			if err := os.Symlink(outside, filepath.Join(drivers, "f.inf_amd64_1")); err != nil {
				t.Fatal(err)
			}
		}, store("f.inf_amd64_1"), "unknown-2520-3a5c17aa-0"},
		{"a path climbing out of the drivers dir", func(t *testing.T, drivers, outside string) {
			write(t, filepath.Join(outside, "libcuda.so.1.1"))
			mkdir(t, drivers)
		}, store(`..\outside`), "unknown-2520-3a5c17aa-0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			drivers, outside, lib := filepath.Join(root, "drivers"), filepath.Join(root, "outside"), filepath.Join(root, "lib")
			tc.tree(t, drivers, outside)
			mkdir(t, lib)
			a := dxcore.Adapter{PCI: dxcore.PCIIDs{Device: 0x2520, SubSystem: 0x3a5c, SubVendor: 0x17aa}, DriverStorePath: tc.path}

			inv, err := driverstore.Build([]dxcore.Adapter{a}, driverstore.Options{LibDir: lib, DriversDir: drivers})
			if err != nil {
				t.Fatal(err)
			}
			if got := adapterid.Of(inv.Adapters)[0].Name; got != tc.want {
				t.Fatalf("driverstore.Build and adapterid name it %s, want %s", got, tc.want)
			}
			h := &fakeHost{luids: []dxcore.LUID{{Low: 1}}, adapters: []dxcore.Adapter{a}, now: time.Unix(1000, 0)}
			p, err := open(Options{NoProcesses: true, DriversDir: drivers}, h.open, h.list, func() time.Time { return h.now })
			if err != nil {
				t.Fatal(err)
			}
			if got := p.Sample().Adapters[0]; got.ID != tc.want || got.Vendor != string(inv.Adapters[0].Vendor) {
				t.Errorf("sample names it %s (vendor %s), the device plugin and info %s (vendor %s)", got.ID, got.Vendor, tc.want, inv.Adapters[0].Vendor)
			}
		})
	}
}

// TestSampleIdentityReadAtOpen: the folder is read when the session
// opens, not at every sample (the sampler runs every few seconds, and the
// folder is on the driver store share); a new session reads it again.
func TestSampleIdentityReadAtOpen(t *testing.T) {
	drivers := filepath.Join(t.TempDir(), "drivers")
	marker := filepath.Join(drivers, "f.inf_amd64_1", "libcuda.so.1.1")
	write(t, marker)
	a := dxcore.Adapter{PCI: dxcore.PCIIDs{Device: 0x2520}, DriverStorePath: `\SystemRoot\System32\DriverStore\FileRepository\f.inf_amd64_1`}
	h := &fakeHost{luids: []dxcore.LUID{{Low: 1}}, adapters: []dxcore.Adapter{a}, now: time.Unix(1000, 0)}
	p, err := open(Options{NoProcesses: true, DriversDir: drivers}, h.open, h.list, func() time.Time { return h.now })
	if err != nil {
		t.Fatal(err)
	}
	vendor := func() string { h.now = h.now.Add(time.Second); return p.Sample().Adapters[0].Vendor }
	if got := vendor(); got != "nvidia" {
		t.Fatalf("at open: vendor %s, want nvidia", got)
	}
	if err := os.Remove(marker); err != nil {
		t.Fatal(err)
	}
	if got := vendor(); got != "nvidia" {
		t.Errorf("the next sample read the folder again: vendor %s", got)
	}
	h.luids = []dxcore.LUID{{Low: 2}} // a driver update: a new session
	if got := vendor(); got != "unknown" {
		t.Errorf("after a reopen: vendor %s, want unknown (the marker is gone)", got)
	}
}

func mkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil { // whatever the umask: Build wants it readable by everyone
		t.Fatal(err)
	}
}

func write(t *testing.T, path string) {
	t.Helper()
	mkdir(t, filepath.Dir(path))
	if err := os.WriteFile(path, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
}
