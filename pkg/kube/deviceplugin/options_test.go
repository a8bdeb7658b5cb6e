package deviceplugin

import (
	"reflect"
	"testing"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/config"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/driverstore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/vendors"
)

// The shipped defaults advertise what existing manifests ask for.
func TestOptionsFromDefaults(t *testing.T) {
	cfg := config.Default()
	got := OptionsFrom(cfg)
	want := Options{Resources: map[driverstore.Vendor]string{
		driverstore.NVIDIA: ResourceNVIDIA, driverstore.AMD: ResourceAMD, driverstore.Intel: ResourceIntel,
		driverstore.Qualcomm: ResourceQualcomm, driverstore.Unknown: ResourceOther,
	}, NPUResource: ResourceNPU, Replicas: 1, CDI: true,
		DxgDevice: "/dev/dxg", LibDir: "/usr/lib/wsl/lib", DriversDir: "/usr/lib/wsl/drivers", RequestEnv: "WSL_GPU_DEVICES"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("OptionsFrom(defaults) = %+v\nwant %+v", got, want)
	}
	cfg.DevicePlugin.IntelResource, cfg.RequestEnv = "", nil
	got = OptionsFrom(cfg)
	if got.Resources[driverstore.Intel] != "" || got.RequestEnv != "" {
		t.Errorf("Intel off, no request env: %+v", got)
	}
}

// TestOptionsFromEveryVendorRow: each row of the vendor table with a
// default resource is advertised under it, from the table alone: a new
// row needs no line here.
func TestOptionsFromEveryVendorRow(t *testing.T) {
	want := map[driverstore.Vendor]string{}
	for _, row := range vendors.Rows() {
		if row.Resource != "" {
			want[row.Name] = row.Resource
		}
	}
	if got := OptionsFrom(config.Default()).Resources; !reflect.DeepEqual(got, want) {
		t.Errorf("OptionsFrom(defaults).Resources = %v\nthe vendor table's    %v", got, want)
	}
}
