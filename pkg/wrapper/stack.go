package wrapper

import (
	"fmt"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/capability"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/devnode"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/driverstore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/edits"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/gpuhost"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/oci"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/request"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/vendorstack"
)

// stackEdits is what the wrapper adds for the vendor stacks and the
// capabilities (package vendorstack): the variables, which only it can set
// on this path (its prestart hook cannot), and the device nodes, whose
// rules the runtime then owns. The binds are left to the hook it adds,
// which makes them as it makes the driver folders'.
func stackEdits(spec *oci.Spec, req request.Request, node devnode.Node, o Options) (edits.Edits, error) {
	caps, err := capability.FromSpec(spec)
	if err != nil {
		return edits.Edits{}, fmt.Errorf("%w: fix the container's GPU request", err)
	}
	opts := vendorstack.ProbeOptions{ROCmDir: o.Config.ROCmDir, DRIDir: o.Config.DRIDir, WSLgDir: o.Config.WSLgDir}
	probe, err := vendorstack.ProbeFor(opts, nil, caps.Set)
	if err != nil {
		return edits.Edits{}, err
	}
	probe.ROCm = vendorstack.ProbeROCm(o.Config.ROCmDir)
	in := vendorstack.Input{All: req.All, Caps: caps.Set, Probe: probe}
	// Only librocdxg (for an AMD GPU) and the selection variables (for a
	// request narrower than all) depend on the adapters: enumerate only
	// then. An enumeration or selection that fails here fails again in
	// the hook this wrapper adds, which says why in its one line and its
	// log: the wrapper then adds what needs no adapter and lets it.
	if probe.ROCm.Lib != "" || !req.All {
		if host, _, err := gpuhost.Probe(node, gpuhost.Options{LibDir: o.Config.LibDir, DriversDir: o.Config.DriversDir, Details: !req.All, ShortLived: true, CacheDir: o.Config.ProbeCache}); err == nil {
			if selected, err := request.Adapters(req, host.Inventory.Adapters); err == nil {
				var usable []driverstore.Adapter
				for _, a := range selected {
					if a.Err == nil {
						usable = append(usable, a)
					}
				}
				in.Host, in.Selected = vendorstack.FromInventory(host.Inventory.Adapters), vendorstack.FromInventory(usable)
			}
		}
	}
	s := vendorstack.Plan(in)
	// The binds are the hook's, which makes them as it makes the driver
	// folders'.
	s.Mounts = nil
	var e edits.Edits
	e.AddStack(s, false)
	return e, nil
}
