package driverstore

import "github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/vendors"

// Vendor names who made an adapter, as users select it ("nvidia"): the
// vendor table's name (package vendors).
type Vendor = vendors.Name

// Vendors the hook tells apart (package vendors holds their table).
const (
	NVIDIA    = vendors.NVIDIA
	AMD       = vendors.AMD
	Intel     = vendors.Intel
	Microsoft = vendors.Microsoft
	Qualcomm  = vendors.Qualcomm
	Unknown   = vendors.Unknown
)

// Vendors lists every vendor the hook tells apart, Unknown last: the names
// a selection, a CDI device or a label may carry.
func Vendors() []Vendor { return vendors.Names() }

// nvidiaMarker is the file only NVIDIA driver store folders hold; its
// presence classifies an adapter the host gave no usable PCI vendor for.
const nvidiaMarker = "libcuda.so.1.1"

// VendorOf classifies a PCI vendor id; ids it does not know are Unknown.
func VendorOf(pciVendor uint32) Vendor { return vendors.Of(pciVendor) }

// Kind is what a is for, from its PCI vendor and type flags
// (vendors.Classify): the one place that says "is this a GPU".
func (a Adapter) Kind() vendors.Kind {
	return vendors.Classify(a.PCI.Vendor, a.Vendor, a.Type.ComputeOnly(), a.Type.Software())
}
