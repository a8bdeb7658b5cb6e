package gpuplan

import (
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/driverstore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/capability"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/edits"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/vendorstack"
)

// stackEdits is what the selected adapters' stacks and the capabilities
// add beyond the folders (package vendorstack decides, for the selected
// adapters with a usable folder).
func stackEdits(c Container, inv *driverstore.Inventory, selected []driverstore.Adapter, probe vendorstack.Host) edits.Stack {
	e := vendorstack.PlanSelected(inv.Adapters, selected, vendorstack.Input{
		All:   c.Request.All,
		Caps:  c.Caps | capability.Default,
		Probe: probe,
	})
	if c.Injected {
		// The CDI devices carry their mounts, nodes and variables, which
		// the engine applied; the loader-cache entries are the hook's.
		return edits.Stack{Ldcache: e.Ldcache}
	}
	return e
}
