package driverstore

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/fixture"
)

func TestFindNvidiaSmi(t *testing.T) {
	tests := []struct {
		name string
		tree []string // under the host: lib/ and drivers/
		want NvidiaSmi
	}{
		{name: "in the lib dir (current drivers)", tree: []string{"exe lib/nvidia-smi", "exe drivers/nv_a/nvidia-smi"},
			want: NvidiaSmi{InLibDir: true}},
		{name: "only in NVIDIA folders (older drivers)", tree: []string{"exe drivers/nv_a/nvidia-smi", "exe drivers/nv_b/nvidia-smi",
			"exe drivers/intel/nvidia-smi"}, // not an NVIDIA folder
			want: NvidiaSmi{Folders: []string{"nv_a", "nv_b"}}},
		{name: "not executable", tree: []string{"file lib/nvidia-smi"}},
		{name: "a directory of that name", tree: []string{"dir lib/nvidia-smi"}},
		{name: "nowhere"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			lib, drivers := filepath.Join(dir, "lib"), filepath.Join(dir, "drivers")
			fixture.Tree(t, dir, append([]string{"dir lib"}, tt.tree...)...)
			inv := &Inventory{LibDir: lib, DriversDir: drivers, Folders: []Folder{
				{Name: "nv_a", HostPath: filepath.Join(drivers, "nv_a"), Vendor: NVIDIA},
				{Name: "intel", HostPath: filepath.Join(drivers, "intel"), Vendor: Intel},
				{Name: "nv_b", HostPath: filepath.Join(drivers, "nv_b"), Vendor: NVIDIA},
			}}
			got := FindNvidiaSmi(inv)
			if got.InLibDir != tt.want.InLibDir || !slices.Equal(got.Folders, tt.want.Folders) {
				t.Fatalf("FindNvidiaSmi = %+v, want %+v", got, tt.want)
			}
		})
	}
}
