package deviceplugin

import (
	"github.com/wsl-gpu-hook/wsl-gpu-hook/config"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/driverstore"
)

// OptionsFrom reads the plugin's options from the hook's configuration,
// so the plugin and the hook agree on host paths and on the variable a
// selection travels in.
func OptionsFrom(cfg config.Config) Options {
	dp := cfg.DevicePlugin
	o := Options{
		Resources: map[driverstore.Vendor]string{
			driverstore.NVIDIA:   dp.NVIDIAResource,
			driverstore.AMD:      dp.AMDResource,
			driverstore.Intel:    dp.IntelResource,
			driverstore.Qualcomm: dp.QualcommResource,
			driverstore.Unknown:  dp.OtherResource,
		},
		NPUResource: dp.NPUResource,
		Replicas:    dp.Replicas,
		CDI:         dp.CDI,
		DxgDevice:   cfg.DxgDevice,
		LibDir:      cfg.LibDir,
		DriversDir:  cfg.DriversDir,
	}
	if len(cfg.RequestEnv) > 0 {
		o.RequestEnv = cfg.RequestEnv[0]
	}
	return o
}
