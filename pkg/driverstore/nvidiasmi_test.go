package driverstore

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestFindNvidiaSmi(t *testing.T) {
	write := func(t *testing.T, p string, mode os.FileMode) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("\x7fELF"), mode); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name  string
		setup func(t *testing.T, lib, drivers string)
		want  NvidiaSmi
	}{
		{name: "in the lib dir (current drivers)", setup: func(t *testing.T, lib, drivers string) {
			write(t, filepath.Join(lib, "nvidia-smi"), 0o755)
			write(t, filepath.Join(drivers, "nv_a", "nvidia-smi"), 0o755)
		}, want: NvidiaSmi{InLibDir: true}},
		{name: "only in NVIDIA folders (older drivers)", setup: func(t *testing.T, lib, drivers string) {
			write(t, filepath.Join(drivers, "nv_a", "nvidia-smi"), 0o755)
			write(t, filepath.Join(drivers, "nv_b", "nvidia-smi"), 0o755)
			write(t, filepath.Join(drivers, "intel", "nvidia-smi"), 0o755) // not an NVIDIA folder
		}, want: NvidiaSmi{Folders: []string{"nv_a", "nv_b"}}},
		{name: "not executable", setup: func(t *testing.T, lib, drivers string) {
			write(t, filepath.Join(lib, "nvidia-smi"), 0o644)
		}},
		{name: "a directory of that name", setup: func(t *testing.T, lib, drivers string) {
			if err := os.MkdirAll(filepath.Join(lib, "nvidia-smi"), 0o755); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "nowhere", setup: func(t *testing.T, lib, drivers string) {}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			lib, drivers := filepath.Join(dir, "lib"), filepath.Join(dir, "drivers")
			if err := os.MkdirAll(lib, 0o755); err != nil {
				t.Fatal(err)
			}
			tt.setup(t, lib, drivers)
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
