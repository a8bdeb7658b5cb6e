package driverstore

// Vendor names who made an adapter, as users select it ("nvidia").
type Vendor string

// Vendors the hook tells apart.
const (
	NVIDIA    Vendor = "nvidia"
	AMD       Vendor = "amd"
	Intel     Vendor = "intel"
	Microsoft Vendor = "microsoft"
	Qualcomm  Vendor = "qualcomm"
	Unknown   Vendor = "unknown"
)

// Vendors lists every vendor the hook tells apart, Unknown last: the names
// a selection, a CDI device or a label may carry.
func Vendors() []Vendor { return []Vendor{NVIDIA, AMD, Intel, Microsoft, Qualcomm, Unknown} }

// Known reports whether v is one of Vendors.
func (v Vendor) Known() bool {
	switch v {
	case NVIDIA, AMD, Intel, Microsoft, Qualcomm, Unknown:
		return true
	}
	return false
}

// PCI vendor ids (pci.ids).
const (
	pciNVIDIA    = 0x10de
	pciAMD       = 0x1002 // ATI: Radeon GPUs
	pciAMDCPU    = 0x1022 // AMD proper: Ryzen AI NPUs
	pciIntel     = 0x8086
	pciMicrosoft = 0x1414 // Basic Render Driver (WARP), virtual adapters
	pciQualcomm  = 0x5143 // Qualcomm's PCI id, as its own OpenCL driver reports it
	// acpiQualcomm is "QCOM" in ASCII, little-endian: the ACPI vendor of
	// the Snapdragon's Adreno GPU and Hexagon NPU, which Windows on Arm
	// reports as the vendor id (DXGI/DXCore VendorId, and the host's
	// answer to PHYSICALADAPTERDEVICEIDS, which the WSL kernel forwards
	// unchanged). The device id is the ACPI one the same way: "0C36"
	// (0x36334330) for the X1-85 GPU, "0D0A" (0x41304430) for the NPU.
	acpiQualcomm = 0x4D4F4351
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
	case pciQualcomm, acpiQualcomm:
		return Qualcomm
	}
	return Unknown
}
