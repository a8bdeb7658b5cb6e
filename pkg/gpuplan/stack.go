package gpuplan

import (
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/capability"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/devnode"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/driverstore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/mounts"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/vendorstack"
)

// stackEdits is what the selected adapters' stacks and the capabilities
// add beyond the folders (package vendorstack decides). Adapters without a
// usable folder get nothing: their stack could not load anyway.
func stackEdits(c Container, inv *driverstore.Inventory, selected []driverstore.Adapter, probe vendorstack.Host) vendorstack.Edits {
	var usable []driverstore.Adapter
	for _, a := range selected {
		if a.Err == nil {
			usable = append(usable, a)
		}
	}
	e := vendorstack.Plan(vendorstack.Input{
		Host:     vendorstack.FromInventory(inv.Adapters),
		Selected: vendorstack.FromInventory(usable),
		All:      c.Request.All,
		Caps:     c.Caps | capability.Default,
		Probe:    probe,
	})
	if c.Injected {
		// The CDI devices carry their mounts, nodes and variables, which
		// the engine applied; the loader-cache entries are the hook's.
		return vendorstack.Edits{Ldcache: e.Ldcache}
	}
	return e
}

// addStack puts the stack's devices and mounts into the plan. Devices are
// made like /dev/dxg (bound from the host in a user namespace) and allowed
// in the same cgroup step.
func (p *Plan) addStack(c Container, e vendorstack.Edits) {
	p.Stack = e
	bind := c.UserNamespace || c.Rootless
	for _, d := range e.Devices {
		n := devnode.Node{Path: d.HostPath, Major: d.Major, Minor: d.Minor}
		p.Nodes = append(p.Nodes, n)
		if c.UserNamespace && c.RuntimeNode {
			// The wrapper put them in the spec with /dev/dxg: the
			// runtime made them, usable in any user namespace.
			continue
		}
		p.Steps = append(p.Steps, mounts.Step{Kind: mounts.Device, Target: d.Path, Source: d.HostPath, Major: d.Major, Minor: d.Minor, BindNode: bind})
	}
	for _, m := range e.Mounts {
		kind := mounts.Bind
		if m.File {
			kind = mounts.BindFile
		}
		p.Steps = append(p.Steps, mounts.Step{Kind: kind, Source: m.HostPath, Target: m.ContainerPath})
	}
}
