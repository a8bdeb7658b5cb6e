package driverstore

// Vendor names who made an adapter, as users select it ("nvidia").
type Vendor string

// Vendors the hook tells apart.
const (
	NVIDIA    Vendor = "nvidia"
	AMD       Vendor = "amd"
	Intel     Vendor = "intel"
	Microsoft Vendor = "microsoft"
	Unknown   Vendor = "unknown"
)

// PCI vendor ids (pci.ids).
const (
	pciNVIDIA    = 0x10de
	pciAMD       = 0x1002 // ATI: Radeon GPUs
	pciAMDCPU    = 0x1022 // AMD proper: Ryzen AI NPUs
	pciIntel     = 0x8086
	pciMicrosoft = 0x1414 // Basic Render Driver (WARP), virtual adapters
)

// nvidiaMarker is the file only NVIDIA driver store folders hold; its
// presence classifies an adapter the host gave no usable PCI vendor for.
const nvidiaMarker = "libcuda.so.1.1"

// VendorOf classifies a PCI vendor id; ids it does not know are Unknown.
func VendorOf(pciVendor uint32) Vendor {
	switch pciVendor {
	case pciNVIDIA:
		return NVIDIA
	case pciAMD, pciAMDCPU:
		return AMD
	case pciIntel:
		return Intel
	case pciMicrosoft:
		return Microsoft
	}
	return Unknown
}
