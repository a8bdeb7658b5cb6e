package gpuhost

import (
	"errors"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/driverstore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/dxcore"
)

// List is the host's adapters with their driver store folders, every
// detail asked, for the device plugin and `info --k8s`: a host with no
// adapter is an empty inventory there, not an error, since the plugin
// then advertises nothing and says why. With o.Resources each adapter's
// driver version and memory are asked too (the DRA driver publishes them).
func List(dxg string, o Options) (*driverstore.Inventory, error) {
	enum, err := dxcore.EnumerateWith(dxg, dxcore.Options{Details: true, Resources: o.Resources})
	if err != nil && !errors.Is(err, dxcore.ErrNoAdapters) {
		return nil, err
	}
	var adapters []dxcore.Adapter
	if enum != nil {
		adapters = enum.Adapters
	}
	return driverstore.Build(adapters, driverstore.Options{LibDir: o.LibDir, DriversDir: o.DriversDir})
}
