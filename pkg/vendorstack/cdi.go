package vendorstack

import (
	"os"

	cdi "tags.cncf.io/container-device-interface/specs-go"
)

// cdiMountOptions are what runtimes use for host library folders, and what
// the prestart path's binds get: read-only, nosuid, nodev.
var cdiMountOptions = []string{"ro", "nosuid", "nodev", "rbind", "rprivate"}

// CDIEdits is e as CDI container edits: the engine makes the nodes with
// their device-cgroup rules, the mounts and the variables. Loader-cache
// entries have no CDI form: the spec's createContainer hook writes them.
// Nodes are mode 0666 in the container, as /dev/dxg is: the container's
// user is rarely in the host's video or render group. Their numbers are
// written out: the kernel's DRM driver fixes them (226), not Windows, so
// they cannot go stale as a driver folder name does.
func (e Edits) CDIEdits() cdi.ContainerEdits {
	var c cdi.ContainerEdits
	for _, m := range e.Mounts {
		c.Mounts = append(c.Mounts, &cdi.Mount{HostPath: m.HostPath, ContainerPath: m.ContainerPath, Options: append([]string{}, cdiMountOptions...)})
	}
	for _, d := range e.Devices {
		mode := os.FileMode(0o666)
		c.DeviceNodes = append(c.DeviceNodes, &cdi.DeviceNode{
			Path: d.Path, HostPath: d.HostPath, Type: "c",
			Major: int64(d.Major), Minor: int64(d.Minor), FileMode: &mode, Permissions: "rw",
		})
	}
	c.Env = e.EnvList()
	if len(c.Env) == 0 {
		c.Env = nil
	}
	return c
}
