package deviceplugin

import (
	"github.com/wsl-gpu-hook/wsl-gpu-hook/config"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/driverstore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/vendors"
)

// OptionsFrom reads the plugin's options from the hook's configuration,
// so the plugin and the hook agree on host paths and on the variable a
// selection travels in.
func OptionsFrom(cfg config.Config) Options {
	dp := cfg.DevicePlugin
	o := Options{
		Resources:   map[driverstore.Vendor]string{},
		NPUResource: dp.NPUResource,
		Replicas:    dp.Replicas,
		CDI:         dp.CDI,
		DxgDevice:   cfg.DxgDevice,
		LibDir:      cfg.LibDir,
		DriversDir:  cfg.DriversDir,
	}
	for _, v := range vendors.Names() {
		if r, ok := dp.Resources.Of(v); ok {
			o.Resources[v] = r
		}
	}
	if len(cfg.RequestEnv) > 0 {
		o.RequestEnv = cfg.RequestEnv[0]
	}
	return o
}
