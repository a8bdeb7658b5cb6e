package cdispec

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/driverstore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/dxcore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/mounts"
)

func laptop() *driverstore.Inventory {
	return &driverstore.Inventory{
		LibDir:     "/usr/lib/wsl/lib",
		DriversDir: "/usr/lib/wsl/drivers",
		Adapters: []driverstore.Adapter{
			{Adapter: dxcore.Adapter{Index: 0}, Vendor: driverstore.Intel, Folder: "iigd_dch.inf_amd64_1"},
			{Adapter: dxcore.Adapter{Index: 1}, Vendor: driverstore.NVIDIA, Folder: "nvltwi.inf_amd64_2"},
			{Adapter: dxcore.Adapter{Index: 2}, Vendor: driverstore.NVIDIA, Folder: "nvltwi.inf_amd64_2"},
			{Adapter: dxcore.Adapter{Index: 3}, Vendor: driverstore.AMD, Err: errors.New("folder missing")},
		},
	}
}

var opts = Options{
	Device:     mounts.HostDevice{Path: "/dev/dxg", Major: 10, Minor: 53},
	LibDir:     "/usr/lib/wsl/lib",
	DriversDir: "/usr/lib/wsl/drivers",
	HookPath:   "/usr/local/bin/wsl-gpu-hook",
	HookArgs:   []string{"wsl-gpu-hook"},
}

func TestGenerate(t *testing.T) {
	spec, err := Generate(laptop(), opts)
	if err != nil {
		t.Fatal(err)
	}
	folders := map[string][]string{}
	for _, d := range spec.Devices {
		for _, m := range d.ContainerEdits.Mounts {
			folders[d.Name] = append(folders[d.Name], filepath.Base(m.HostPath))
		}
	}
	want := map[string][]string{
		"0": {"iigd_dch.inf_amd64_1"}, "1": {"nvltwi.inf_amd64_2"}, "2": {"nvltwi.inf_amd64_2"},
		"intel": {"iigd_dch.inf_amd64_1"}, "nvidia": {"nvltwi.inf_amd64_2"},
		"all": {"iigd_dch.inf_amd64_1", "nvltwi.inf_amd64_2"},
	}
	if !reflect.DeepEqual(folders, want) {
		t.Fatalf("device folders = %v\nwant %v", folders, want)
	}
	if spec.Version != "0.5.0" {
		t.Errorf("cdiVersion = %s, want 0.5.0 (the oldest that has hostPath: podman 4.3 reads it)", spec.Version)
	}

	// What an engine does with the file: podman, containerd and Docker load
	// specs through this same package.
	data, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "wsl-gpu-hook.json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	loaded, err := cdiapi.ReadSpec(path, 0)
	if err != nil {
		t.Fatalf("engines would reject the spec: %v", err)
	}
	if loaded.GetDevice("all") == nil || loaded.GetVendor() != "wsl-gpu-hook.dev" || loaded.GetClass() != "gpu" {
		t.Fatalf("loaded spec: vendor %s class %s", loaded.GetVendor(), loaded.GetClass())
	}
}

func TestGenerateNothing(t *testing.T) {
	inv := &driverstore.Inventory{Adapters: []driverstore.Adapter{{Adapter: dxcore.Adapter{Index: 0}, Err: errors.New("missing")}}}
	if _, err := Generate(inv, opts); err == nil {
		t.Fatal("Generate without any driver folder succeeded")
	}
}
