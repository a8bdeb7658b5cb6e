// Package simhost describes simulated WSL2 GPU hosts: which adapters the
// Windows side reports through /dev/dxg and which files Windows mounts into
// the VM. It is test-only data shared by the fixture generator (the files)
// and dxgsim (the ioctl answers), so both always describe the same machine.
//
// Names, ids and folder shapes follow ../shared/reference/wsl-host.md so
// tests look like real machines.
package simhost

import (
	"fmt"
	"sort"
)

// PCI vendor ids as the host reports them.
const (
	VendorNVIDIA uint32 = 0x10DE
	VendorAMD    uint32 = 0x1002 // ATI: Radeon GPUs
	// VendorAMDCPU is AMD proper, whose Ryzen AI NPUs (XDNA) the host
	// reports beside the Radeon iGPU.
	VendorAMDCPU    uint32 = 0x1022
	VendorIntel     uint32 = 0x8086
	VendorMicrosoft uint32 = 0x1414
	// VendorQualcomm is what Windows on Arm reports for the Snapdragon's
	// ACPI devices: "QCOM" in little-endian ASCII, not Qualcomm's PCI id
	// 0x5143. Device ids are ACPI ones the same way ("0C36" = 0x36334330).
	VendorQualcomm uint32 = 0x4D4F4351
)

// Adapter type flags (D3DKMT_ADAPTERTYPE bits) the simulated host reports.
const (
	FlagRender          uint32 = 0x1
	FlagSoftware        uint32 = 0x4
	FlagHybridDiscrete  uint32 = 0x10
	FlagHybridIntegrate uint32 = 0x20
	FlagParavirtualized uint32 = 0x80
	FlagComputeOnly     uint32 = 0x800
)

// FolderKind says which set of Linux-side files a driver store folder holds.
type FolderKind string

// Folder kinds the fixture generator knows how to populate.
const (
	FolderNVIDIA FolderKind = "nvidia"
	FolderAMD    FolderKind = "amd"
	FolderIntel  FolderKind = "intel"
	FolderNPU    FolderKind = "intel-npu"
	// FolderQualcomm is the Adreno GPU's package (qcdxkmsuc<soc>.inf),
	// FolderHexagon the Hexagon NPU's (an MCDM compute driver).
	FolderQualcomm FolderKind = "qualcomm"
	FolderHexagon  FolderKind = "qualcomm-npu"
	// FolderXDNA is AMD's Ryzen AI NPU package (kipudrv.inf, "NPU
	// Compute Accelerator Device"): an MCDM compute driver.
	FolderXDNA FolderKind = "amd-npu"
)

// Adapter is one GPU (or NPU) as the Windows host reports it.
type Adapter struct {
	LUIDLow, LUIDHigh uint32
	VendorID          uint32
	DeviceID          uint32
	SubVendorID       uint32
	SubSystemID       uint32
	RevisionID        uint32
	WDDMVersion       uint32 // DRIVERVERSION answer: 3000 = WDDM 3.0
	Flags             uint32 // ADAPTERTYPE answer
	Description       string // DRIVER_DESCRIPTION answer
	// DedicatedMemory is GETSEGMENTSIZE's dedicated video memory in
	// bytes: a discrete GPU's VRAM, an iGPU's small carve-out.
	DedicatedMemory uint64
	// DriverStorePath is the Windows path QUERYREGISTRY(DRIVERSTOREPATH)
	// returns; real hosts use several spellings, so profiles vary it.
	DriverStorePath string
	Folder          string     // folder name under /usr/lib/wsl/drivers
	Kind            FolderKind // which files the folder holds
}

// ComputeOnly reports whether ENUMADAPTERS2, and ENUMADAPTERS3 without the
// include-compute-only filter, leave this adapter out.
func (a Adapter) ComputeOnly() bool { return a.Flags&FlagComputeOnly != 0 }

// Profile is a whole simulated host.
type Profile struct {
	Name     string
	Summary  string
	Adapters []Adapter
	// NVIDIALib says whether /usr/lib/wsl/lib carries NVIDIA's files
	// (libcuda.so*, nvidia-smi, ...), as it does once an NVIDIA driver is
	// installed on Windows.
	NVIDIALib bool
	// ROCm says the WSL distro has ROCm 7.2 with librocdxg installed under
	// /opt/rocm, as AMD's WSL instructions have users do.
	ROCm bool
	// DRI says WSL created /dev/dri/card0 and renderD128 (a Windows driver
	// with video support); WSLg that WSLg runs (/mnt/wslg with its X11,
	// Wayland and PulseAudio sockets), as on Windows 11.
	DRI, WSLg bool
}

const storePrefix = `\SystemRoot\System32\DriverStore\FileRepository\`

var profiles = []Profile{
	{
		Name:      "nvidia-laptop",
		Summary:   "Intel Iris Xe iGPU + NVIDIA RTX 3060 Laptop dGPU (Optimus)",
		NVIDIALib: true,
		DRI:       true,
		WSLg:      true,
		Adapters: []Adapter{
			{
				LUIDLow: 0x1a1d77, VendorID: VendorIntel, DeviceID: 0x9a49,
				SubVendorID: 0x17aa, SubSystemID: 0x22d8, RevisionID: 0x01,
				WDDMVersion: 3000, Flags: FlagRender | FlagHybridIntegrate | FlagParavirtualized,
				Description: "Intel(R) Iris(R) Xe Graphics", DedicatedMemory: 128 << 20,
				DriverStorePath: storePrefix + "iigd_dch.inf_amd64_ba2ab4a3e0e0b2ea",
				Folder:          "iigd_dch.inf_amd64_ba2ab4a3e0e0b2ea", Kind: FolderIntel,
			},
			{
				LUIDLow: 0x4486d1, VendorID: VendorNVIDIA, DeviceID: 0x2520,
				SubVendorID: 0x17aa, SubSystemID: 0x3a5c, RevisionID: 0xa1,
				WDDMVersion: 3000, Flags: FlagRender | FlagHybridDiscrete | FlagParavirtualized,
				Description: "NVIDIA GeForce RTX 3060 Laptop GPU", DedicatedMemory: 6 << 30,
				DriverStorePath: `C:\Windows\System32\DriverStore\FileRepository\nvltwi.inf_amd64_7b2a5c1c4e6f8d90`,
				Folder:          "nvltwi.inf_amd64_7b2a5c1c4e6f8d90", Kind: FolderNVIDIA,
			},
		},
	},
	{
		Name:    "amd-desktop",
		Summary: "AMD Radeon RX 7900 XTX, ROCm 7.2 with librocdxg in the distro",
		ROCm:    true,
		DRI:     true,
		WSLg:    true,
		Adapters: []Adapter{
			{
				LUIDLow: 0x10b3c, VendorID: VendorAMD, DeviceID: 0x744c,
				SubVendorID: 0x1002, SubSystemID: 0x0e3b, RevisionID: 0xc8,
				WDDMVersion: 3100, Flags: FlagRender | FlagParavirtualized,
				Description: "AMD Radeon RX 7900 XTX", DedicatedMemory: 24 << 30,
				DriverStorePath: `\\?\C:\WINDOWS\System32\DriverStore\FileRepository\u0398975.inf_amd64_cab3843582148687`,
				Folder:          "u0398975.inf_amd64_cab3843582148687", Kind: FolderAMD,
			},
		},
	},
	{
		Name:    "intel-npu",
		Summary: "Intel Arc (Meteor Lake) iGPU + Intel AI Boost NPU (compute-only)",
		DRI:     true,
		WSLg:    true,
		Adapters: []Adapter{
			{
				LUIDLow: 0x13f2e, VendorID: VendorIntel, DeviceID: 0x7d55,
				SubVendorID: 0x1028, SubSystemID: 0x0c11, RevisionID: 0x08,
				WDDMVersion: 3100, Flags: FlagRender | FlagParavirtualized,
				Description: "Intel(R) Arc(TM) Graphics", DedicatedMemory: 128 << 20,
				DriverStorePath: storePrefix + "6_lenovo_iigd_dch.inf_amd64_1f0e3c9a77d2b410",
				Folder:          "6_lenovo_iigd_dch.inf_amd64_1f0e3c9a77d2b410", Kind: FolderIntel,
			},
			{
				LUIDLow: 0x13f71, VendorID: VendorIntel, DeviceID: 0x7d1d,
				SubVendorID: 0x1028, SubSystemID: 0x0c11, RevisionID: 0x04,
				WDDMVersion: 3100, Flags: FlagComputeOnly | FlagParavirtualized,
				Description: "Intel(R) AI Boost", DedicatedMemory: 0,
				DriverStorePath: storePrefix + "KIPUDRV.INF_AMD64_5D9E7C7A1B3F2E08",
				Folder:          "kipudrv.inf_amd64_5d9e7c7a1b3f2e08", Kind: FolderNPU,
			},
		},
	},
	{
		Name:    "intel-arc-desktop",
		Summary: "Intel UHD 770 iGPU + Intel Arc A770 dGPU, one driver package for both",
		DRI:     true,
		WSLg:    true,
		Adapters: []Adapter{
			{
				LUIDLow: 0x11c5e, VendorID: VendorIntel, DeviceID: 0xa780,
				SubVendorID: 0x1458, SubSystemID: 0xd000, RevisionID: 0x04,
				WDDMVersion: 3100, Flags: FlagRender | FlagParavirtualized,
				Description: "Intel(R) UHD Graphics 770", DedicatedMemory: 128 << 20,
				DriverStorePath: storePrefix + "iigd_dch.inf_amd64_8d7e3f0c5a1b2946",
				Folder:          "iigd_dch.inf_amd64_8d7e3f0c5a1b2946", Kind: FolderIntel,
			},
			{
				LUIDLow: 0x12f3a, VendorID: VendorIntel, DeviceID: 0x56a0,
				SubVendorID: 0x8086, SubSystemID: 0x1020, RevisionID: 0x08,
				WDDMVersion: 3100, Flags: FlagRender | FlagParavirtualized,
				Description: "Intel(R) Arc(TM) A770 Graphics", DedicatedMemory: 16 << 30,
				DriverStorePath: storePrefix + "iigd_dch.inf_amd64_8d7e3f0c5a1b2946",
				Folder:          "iigd_dch.inf_amd64_8d7e3f0c5a1b2946", Kind: FolderIntel,
			},
		},
	},
	{
		Name:      "compute-only",
		Summary:   "NVIDIA A100 in MCDM (compute-only) mode",
		NVIDIALib: true,
		Adapters: []Adapter{
			{
				LUIDLow: 0x2f0a1, VendorID: VendorNVIDIA, DeviceID: 0x20b0,
				SubVendorID: 0x10de, SubSystemID: 0x1450, RevisionID: 0xa1,
				WDDMVersion: 3000, Flags: FlagComputeOnly | FlagParavirtualized,
				Description: "NVIDIA A100-SXM4-40GB", DedicatedMemory: 40 << 30,
				DriverStorePath: storePrefix + "nvami.inf_amd64_0c5f2d19ab7e6634",
				Folder:          "nvami.inf_amd64_0c5f2d19ab7e6634", Kind: FolderNVIDIA,
			},
		},
	},
	{
		// Windows on Arm: what WSL shows on a Snapdragon X Elite laptop.
		// The driver store folders are arm64 packages (<inf>_arm64_<hash>),
		// the lib dir has Microsoft's D3D12 and DXCore libraries and no
		// NVIDIA ones. The fixture's ELF objects are built for the test
		// machine, so containers on it can load them; on a real arm64
		// host they are aarch64.
		Name:    "snapdragon-x",
		Summary: "Snapdragon X Elite (Windows on Arm): Adreno X1-85 GPU + Hexagon NPU (compute-only), arm64 driver store",
		WSLg:    true,
		Adapters: []Adapter{
			{
				LUIDLow: 0xe3b5, VendorID: VendorQualcomm, DeviceID: 0x36334330, // ACPI QCOM0C36
				WDDMVersion: 3100, Flags: FlagRender | FlagParavirtualized,
				Description: "Qualcomm(R) Adreno(TM) X1-85 GPU", DedicatedMemory: 0,
				DriverStorePath: storePrefix + "qcdxkmsuc8380.inf_arm64_9a0f6b4e21c3d857",
				Folder:          "qcdxkmsuc8380.inf_arm64_9a0f6b4e21c3d857", Kind: FolderQualcomm,
			},
			{
				LUIDLow: 0xe47a, VendorID: VendorQualcomm, DeviceID: 0x41304430, // ACPI QCOM0D0A
				WDDMVersion: 3100, Flags: FlagComputeOnly | FlagParavirtualized,
				Description: "Snapdragon(R) X Elite - X1E78100 - Qualcomm(R) Hexagon(TM) NPU", DedicatedMemory: 0,
				DriverStorePath: `C:\Windows\System32\DriverStore\FileRepository\qcnspmcdm8380.inf_arm64_4e7d2c19b0a85f36`,
				Folder:          "qcnspmcdm8380.inf_arm64_4e7d2c19b0a85f36", Kind: FolderHexagon,
			},
		},
	},
	{
		// A Ryzen AI laptop: the Radeon iGPU is ATI's vendor (0x1002), the
		// NPU AMD's own (0x1022), compute-only under MCDM. AMD's NPU
		// driver package is kipudrv.inf (AMD's Ryzen AI install guide runs
		// amd_install_kipudrv.bat; the store folder is
		// kipudrv.inf_amd64_<hash>).
		Name:    "ryzen-ai",
		Summary: "AMD Ryzen AI 9 HX 370: Radeon 890M iGPU + XDNA 2 NPU (compute-only)",
		DRI:     true,
		WSLg:    true,
		Adapters: []Adapter{
			{
				LUIDLow: 0x11f4c, VendorID: VendorAMD, DeviceID: 0x150e,
				SubVendorID: 0x1043, SubSystemID: 0x1f63, RevisionID: 0xc1,
				WDDMVersion: 3200, Flags: FlagRender | FlagHybridIntegrate | FlagParavirtualized,
				Description: "AMD Radeon(TM) 890M Graphics", DedicatedMemory: 512 << 20,
				DriverStorePath: storePrefix + "u0412733.inf_amd64_5e1c0b8f3d27a964",
				Folder:          "u0412733.inf_amd64_5e1c0b8f3d27a964", Kind: FolderAMD,
			},
			{
				LUIDLow: 0x11f8a, VendorID: VendorAMDCPU, DeviceID: 0x17f0,
				SubVendorID: 0x1043, SubSystemID: 0x1f63, RevisionID: 0x10,
				WDDMVersion: 3200, Flags: FlagComputeOnly | FlagParavirtualized,
				Description: "NPU Compute Accelerator Device", DedicatedMemory: 0,
				DriverStorePath: storePrefix + "kipudrv.inf_amd64_1a1aa059597c4810",
				Folder:          "kipudrv.inf_amd64_1a1aa059597c4810", Kind: FolderXDNA,
			},
		},
	},
	{
		Name:    "no-gpu",
		Summary: "WSL2 with /dev/dxg but no GPU adapter",
	},
}

// Lookup returns the profile with the given name.
func Lookup(name string) (Profile, error) {
	for _, p := range profiles {
		if p.Name == name {
			return p, nil
		}
	}
	return Profile{}, fmt.Errorf("unknown profile %q (known: %v)", name, Names())
}

// Names lists the profile names in a stable order.
func Names() []string {
	var n []string
	for _, p := range profiles {
		n = append(n, p.Name)
	}
	sort.Strings(n)
	return n
}
