package vendors

// Name is who made an adapter, as users select it ("nvidia").
type Name string

// Vendors the project tells apart.
const (
	NVIDIA    Name = "nvidia"
	AMD       Name = "amd"
	Intel     Name = "intel"
	Microsoft Name = "microsoft"
	Qualcomm  Name = "qualcomm"
	Unknown   Name = "unknown"
)

// Kind is what an adapter is for.
type Kind string

// Kinds of adapters.
const (
	GPU      Kind = "gpu"
	NPU      Kind = "npu"
	Software Kind = "software"
)

// Row is one vendor.
type Row struct {
	Name Name
	// CDIKind is the CDI kind engines turn --gpus into for this vendor's
	// GPUs (podman 5 and Docker 29.2+ for NVIDIA, Docker 29.3+ for AMD);
	// "" when its adapters are named under the project's own kind only.
	CDIKind string
	// Resource is the extended resource its GPUs are advertised under by
	// default, as existing manifests and charts ask for them.
	Resource string
	// ComputeOnlyGPU: its compute-only (MCDM) adapters are datacenter
	// GPUs in compute mode, which its compute stack runs on, not NPUs.
	ComputeOnlyGPU bool
}

// ID is one vendor id as the host reports it.
type ID struct {
	ID     uint32
	Vendor Name
	// Kind, when set, is the kind of every adapter with this id,
	// whatever its flags say.
	Kind Kind
}

// Rows is the vendor table, in the order users see vendors listed,
// Unknown last.
func Rows() []Row {
	return []Row{
		{Name: NVIDIA, CDIKind: CDIKindNVIDIA, Resource: ResourceNVIDIA, ComputeOnlyGPU: true},
		{Name: AMD, CDIKind: CDIKindAMD, Resource: ResourceAMD, ComputeOnlyGPU: true},
		{Name: Intel, Resource: ResourceIntel},
		// Microsoft's adapters (WARP, virtual ones) are advertised as
		// Unknown's.
		{Name: Microsoft},
		{Name: Qualcomm, Resource: ResourceQualcomm},
		{Name: Unknown, Resource: ResourceOther},
	}
}

// IDs are the vendor ids (pci.ids, and the ACPI ids Windows on Arm
// reports) and whom each names.
func IDs() []ID {
	return []ID{
		{ID: 0x10de, Vendor: NVIDIA},
		{ID: 0x1002, Vendor: AMD}, // ATI: Radeon GPUs
		// AMD proper: in WSL its adapters are Ryzen AI NPUs (XDNA), its
		// GPUs all carry ATI's id.
		{ID: 0x1022, Vendor: AMD, Kind: NPU},
		{ID: 0x8086, Vendor: Intel},
		{ID: 0x1414, Vendor: Microsoft}, // Basic Render Driver (WARP), virtual adapters
		{ID: 0x5143, Vendor: Qualcomm},  // Qualcomm's PCI id, as its own OpenCL driver reports it
		// "QCOM" in ASCII, little-endian: the ACPI vendor of the
		// Snapdragon's Adreno GPU and Hexagon NPU, which Windows on Arm
		// reports as the vendor id (DXGI/DXCore VendorId, and the host's
		// answer to PHYSICALADAPTERDEVICEIDS, which the WSL kernel
		// forwards unchanged). The device id is the ACPI one the same
		// way: "0C36" (0x36334330) for the X1-85 GPU.
		{ID: 0x4D4F4351, Vendor: Qualcomm},
	}
}

// Default resource names (Row.Resource), as existing manifests and charts
// ask for them.
const (
	ResourceNVIDIA = "nvidia.com/gpu"
	ResourceAMD    = "amd.com/gpu"
	ResourceIntel  = "gpu.intel.com/dxg" // Intel's own plugin's -wsl mode
	// ResourceQualcomm is the Snapdragon's Adreno GPU: no Qualcomm plugin
	// serves WSL, so the name follows NVIDIA's and AMD's.
	ResourceQualcomm = "qualcomm.com/gpu"
	ResourceOther    = "wsl-gpu-hook.dev/dxg"
	// NPUResource is where NPUs are advertised, whatever their vendor:
	// never under a GPU resource.
	NPUResource = "wsl-gpu-hook.dev/npu"
)

// CDI kinds: the project's own, which names every adapter, and the
// vendors' (Row.CDIKind), which name their GPUs.
const (
	OwnCDIKind    = "wsl-gpu-hook.dev/gpu"
	CDIKindNVIDIA = "nvidia.com/gpu"
	CDIKindAMD    = "amd.com/gpu"
)

// Of names the vendor of a PCI or ACPI vendor id; ids the table does not
// hold are Unknown.
func Of(pciVendor uint32) Name {
	if id, ok := lookup(pciVendor); ok {
		return id.Vendor
	}
	return Unknown
}

func lookup(pciVendor uint32) (ID, bool) {
	for _, id := range IDs() {
		if id.ID == pciVendor {
			return id, true
		}
	}
	return ID{}, false
}

// RowOf returns v's row; a name the table does not hold gets Unknown's.
func RowOf(v Name) Row {
	rows := Rows()
	for _, r := range rows {
		if r.Name == v {
			return r
		}
	}
	return rows[len(rows)-1]
}

// Names lists every vendor, Unknown last: the names a selection, a CDI
// device or a label may carry.
func Names() []Name {
	rows := Rows()
	out := make([]Name, len(rows))
	for i, r := range rows {
		out[i] = r.Name
	}
	return out
}

// Known reports whether v is one of Names.
func (v Name) Known() bool {
	for _, r := range Rows() {
		if r.Name == v {
			return true
		}
	}
	return false
}

// Classify decides what an adapter is: the one place that says "is this
// a GPU". pciVendor is the id the host reported; v the vendor the adapter
// was found to be, which differs from the id's when the host gave no
// usable id and the driver folder told (an NVIDIA folder's marker file).
// computeOnly and software are its type flags (D3DKMT_ADAPTERTYPE), false
// when enumeration did not ask them.
func Classify(pciVendor uint32, v Name, computeOnly, software bool) Kind {
	if software {
		return Software
	}
	if id, ok := lookup(pciVendor); ok && id.Kind != "" {
		return id.Kind
	}
	if computeOnly && !RowOf(v).ComputeOnlyGPU {
		return NPU
	}
	return GPU
}

// Selects reports whether a selection of vendor want ("vendor:amd", what
// amd.com/gpu=all and wsl-gpu-hook.dev/gpu=amd stand for) takes an
// adapter of vendor v and kind k. A vendor with a CDI kind is selected
// for its GPUs only, which its PCI ids tell without the adapter's type
// (the hook's fast path enumerates without it): AMD's Ryzen AI NPU is no
// amd.com/gpu. Other vendors' selections take all their adapters, as
// their NPUs share their GPUs' id. A kind not known ("") is taken.
func Selects(want, v Name, k Kind) bool {
	return v == want && (RowOf(want).CDIKind == "" || k != NPU && k != Software)
}
