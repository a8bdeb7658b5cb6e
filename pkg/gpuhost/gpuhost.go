// Package gpuhost reads what the host offers a container, for gpuplan to
// decide from: the adapters the GPU device enumerates, their driver store
// folders, the loader-cache entries of the lib dir and where nvidia-smi is.
//
// It only reads. The device node itself is stat'ed by devnode.Stat before,
// because a createContainer hook must allow the node in its own device
// cgroup before it can open it to enumerate (see gpuplan.Container.Cgroup).
package gpuhost

import (
	"fmt"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/devnode"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/driverstore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/dxcore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/gpuplan"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/ldcache"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/wsl"
)

// Options are the host paths, from the configuration.
type Options struct {
	LibDir, DriversDir string
	// Ldcache scans the lib dir for loader-cache entries; without it the
	// container's cache is left alone.
	Ldcache bool
	// Details also asks each adapter's type and description: the
	// selection variables of a request narrower than all need them
	// (vendorstack: which adapters render, which Intel ones are GPUs,
	// Mesa's adapter name). Three more round trips per adapter.
	Details bool
	// ShortLived: the process holds no other /dev/dxg fd, and closing the
	// enumeration's own fd frees the adapter handles, so no CLOSEADAPTER
	// is sent (dxcore.Options.CloseHandlesWithFD). The hook and the
	// commands are; the device plugin is not.
	ShortLived bool
	// Resources (List only) also asks each adapter's driver version and
	// memory sizes: two more round trips per adapter, for the DRA driver.
	Resources bool
}

// Probe enumerates the adapters behind node and reads the driver store.
// Adapters the enumeration had to skip are returned for the log. It asks
// the host only what the decision uses (ids and driver store path), as it
// runs on every container start; info asks for the details.
func Probe(node devnode.Node, o Options) (gpuplan.Host, []error, error) {
	h := gpuplan.Host{Node: node}
	enum, err := dxcore.EnumerateWith(node.Path, dxcore.Options{Details: o.Details, CloseHandlesWithFD: o.ShortLived})
	if err != nil {
		return h, nil, err
	}
	var skipped []error
	for _, s := range enum.Skipped {
		skipped = append(skipped, s)
	}
	h.Inventory, err = driverstore.Build(enum.Adapters, driverstore.Options{LibDir: o.LibDir, DriversDir: o.DriversDir})
	if err != nil {
		return h, skipped, err
	}
	h.NvidiaSmi = driverstore.FindNvidiaSmi(h.Inventory)
	if o.Ldcache {
		if h.Ldcache, err = LdcacheEntries(h.Inventory.LibDir); err != nil {
			return h, skipped, err
		}
	}
	return h, skipped, nil
}

// LdcacheEntries returns the loader-cache entries for the host lib dir as
// the container sees it, never nil: an empty lib dir still gets a cache.
func LdcacheEntries(libDir string) ([]ldcache.Entry, error) {
	entries, err := ldcache.ScanDir(libDir, wsl.LibDir)
	if err != nil {
		return nil, fmt.Errorf("scan %s for the loader cache: %w", libDir, err)
	}
	if entries == nil {
		entries = []ldcache.Entry{}
	}
	return entries, nil
}
