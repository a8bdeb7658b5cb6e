package wrapper

import (
	"fmt"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/devnode"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/driverstore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/gpuhost"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/stackprobe"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/wsl"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/capability"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/edits"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/oci"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/request"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/vendorstack"
)

// Edits is what the wrapper puts into config.json for a container asking
// req with caps: /dev/dxg, which the runtime then makes and whose rule it
// owns; the vendor stacks' and capabilities' nodes and variables (package
// vendorstack), which only the wrapper can set on this path; and hook, the
// prestart hook that makes the rest as for any container (config.json
// carries no files or links, and the hook binds the stacks' files as it
// binds the driver folders). adapters is the host's enumeration, nil when
// the wrapper did not enumerate. It does no I/O.
func Edits(req request.Selection, caps capability.Set, node devnode.Node, probe vendorstack.Host, adapters []driverstore.Adapter, hook edits.Hook) edits.Edits {
	var host, selected []driverstore.Adapter
	if adapters != nil {
		if sel, err := request.Adapters(req, adapters); err == nil {
			host, selected = adapters, sel
		}
	}
	s := vendorstack.PlanSelected(host, selected, vendorstack.Input{All: req.All, Caps: caps, Probe: probe})
	s.Mounts = nil
	e := edits.Edits{Node: edits.Device{Path: wsl.Device, Node: node, Access: edits.AccessDxg}, Hooks: []edits.Hook{hook}}
	e.AddStack(s, false)
	return e
}

// containerEdits probes what Edits needs and builds them.
func containerEdits(spec *oci.Spec, req request.Selection, node devnode.Node, o Options, hook edits.Hook) (edits.Edits, error) {
	caps, err := capability.FromSpec(spec)
	if err != nil {
		return edits.Edits{}, fmt.Errorf("%w: fix the container's GPU request", err)
	}
	opts := stackprobe.Options{ROCmDir: o.Config.ROCmDir, DRIDir: o.Config.DRIDir, WSLgDir: o.Config.WSLgDir}
	probe, err := stackprobe.For(opts, nil, caps.Set)
	if err != nil {
		return edits.Edits{}, err
	}
	probe.ROCm = stackprobe.ROCm(o.Config.ROCmDir)
	// Only librocdxg (for an AMD GPU) and the selection variables (for a
	// request narrower than all) depend on the adapters: enumerate only
	// then. An enumeration or selection that fails here fails again in
	// the hook this wrapper adds, which says why in its one line and its
	// log: the wrapper then adds what needs no adapter and lets it.
	var adapters []driverstore.Adapter
	if probe.ROCm.Lib != "" || !req.All {
		if host, _, err := gpuhost.Probe(node, gpuhost.Options{LibDir: o.Config.LibDir, DriversDir: o.Config.DriversDir, Details: !req.All, ShortLived: true, CacheDir: o.Config.ProbeCache, Sysfs: o.Config.SysfsDir}); err == nil {
			adapters = host.Inventory.Adapters
		}
	}
	return Edits(req, caps.Set, node, probe, adapters, hook), nil
}
