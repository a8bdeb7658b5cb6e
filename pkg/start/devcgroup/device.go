package devcgroup

import (
	"fmt"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/devnode"
)

// validate refuses numbers no device cgroup rule can name.
func validate(dev devnode.Node) error {
	// A device number has 12 major and 20 minor bits; no wildcards here, as
	// exactly one device is to be allowed.
	if dev.Major >= 1<<12 || dev.Minor >= 1<<20 {
		return fmt.Errorf("device %s: major must be in [0, 4095] and minor in [0, 1048575]", dev)
	}
	return nil
}
