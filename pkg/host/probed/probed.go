// Package probed holds what a probe found on the host: the /dev/dxg node,
// the adapters with their driver folders, nvidia-smi, the loader-cache
// entries and what the vendor stacks can use. It is data only, so that the
// probe (package gpuhost) and its cache (package probecache), which fill
// it, and the decision (package gpuplan), which reads it, do not import
// one another.
package probed

import (
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/devnode"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/driverstore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/ldcache"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/vendorstack"
)

// Host is what the host offers, as package gpuhost probed it or package
// probecache remembered it.
type Host struct {
	// Node is the host's /dev/dxg.
	Node devnode.Node
	// Inventory is the adapters with their folders, the lib dir and the
	// drivers dir.
	Inventory *driverstore.Inventory
	// NvidiaSmi says where the host has nvidia-smi.
	NvidiaSmi driverstore.NvidiaSmi
	// Ldcache is the loader-cache entries for the lib dir; nil leaves the
	// container's cache alone.
	Ldcache []ldcache.Entry
	// Stack is what the host offers the vendor stacks and capabilities
	// beyond the driver folders (librocdxg, /dev/dri, WSLg), as
	// vendorstack's probes found it.
	Stack vendorstack.Host
}
