package adapterid

import (
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/driverstore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/vendors"
)

// Kind is what an adapter is for (package vendors decides).
type Kind = vendors.Kind

// Kinds of adapters.
const (
	GPU      = vendors.GPU
	NPU      = vendors.NPU
	Software = vendors.Software
)

// KindOf decides what a is (driverstore.Adapter.Kind, which asks
// vendors.Classify).
func KindOf(a driverstore.Adapter) Kind { return a.Kind() }
