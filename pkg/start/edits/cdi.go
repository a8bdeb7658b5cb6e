package edits

import (
	"io/fs"

	cdi "tags.cncf.io/container-device-interface/specs-go"
)

// cdiMountOptions are what runtimes use for host library folders, and what
// the hook's binds get: read-only, nosuid, nodev.
var cdiMountOptions = []string{"ro", "nosuid", "nodev", "rbind", "rprivate"}

// CDI is e as CDI container edits: the engine makes the nodes with their
// device-cgroup rules, the mounts, the variables, and runs the hooks.
// Files, loader-cache entries and links have no CDI form, nor has a
// mount's alias: a value for CDI leaves them to its hook (the cdi-hook,
// which renders them as steps), and CDI drops them.
//
// Nodes are mode 0666 in the container: its user is rarely in the host's
// video or render group. /dev/dxg is written without numbers: it is a misc
// device with a dynamic minor, so the engine stats the host path at every
// start instead. The other nodes' numbers are written out: the kernel's DRM
// driver fixes them (226), not Windows, so they cannot go stale as a driver
// folder name does.
func (e Edits) CDI() cdi.ContainerEdits {
	var c cdi.ContainerEdits
	if e.Node.Path != "" {
		mode := fs.FileMode(0o666)
		c.DeviceNodes = append(c.DeviceNodes, &cdi.DeviceNode{
			Path: e.Node.Path, HostPath: e.Node.Node.Path, Type: "c", FileMode: &mode, Permissions: e.Node.Access,
		})
	}
	for _, d := range e.Devices {
		mode := fs.FileMode(0o666)
		c.DeviceNodes = append(c.DeviceNodes, &cdi.DeviceNode{
			Path: d.Path, HostPath: d.Node.Path, Type: "c",
			Major: int64(d.Node.Major), Minor: int64(d.Node.Minor), FileMode: &mode, Permissions: d.Access,
		})
	}
	for _, m := range e.Mounts {
		c.Mounts = append(c.Mounts, &cdi.Mount{HostPath: m.Source, ContainerPath: m.Target, Options: append([]string{}, cdiMountOptions...)})
	}
	if len(e.Env) > 0 {
		c.Env = append([]string{}, e.Env...)
	}
	for _, h := range e.Hooks {
		c.Hooks = append(c.Hooks, &cdi.Hook{HookName: h.Stage, Path: h.Path, Args: append([]string{}, h.Args...)})
	}
	return c
}
