package dxcore

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
)

// LUID is the locally unique id Windows gives an adapter for the life of the
// boot; it is how D3D12, DXCore and CUDA name an adapter on WSL.
type LUID struct {
	Low  uint32
	High int32
}

// Uint64 packs the LUID the way Windows tools print it.
func (l LUID) Uint64() uint64 { return uint64(uint32(l.High))<<32 | uint64(l.Low) }

// String formats the LUID as hex, e.g. "0x4486d1"; ParseLUID reads it back.
func (l LUID) String() string { return fmt.Sprintf("0x%x", l.Uint64()) }

// AdapterType is the D3DKMT_ADAPTERTYPE bit set the host reports.
type AdapterType uint32

// Adapter type bits (d3dkmthk.h, D3DKMT_ADAPTERTYPE).
const (
	TypeRender          AdapterType = 0x1
	TypeDisplay         AdapterType = 0x2
	TypeSoftware        AdapterType = 0x4
	TypePost            AdapterType = 0x8
	TypeHybridDiscrete  AdapterType = 0x10
	TypeHybridIntegrate AdapterType = 0x20
	TypeIndirectDisplay AdapterType = 0x40
	TypeParavirtualized AdapterType = 0x80
	TypeACG             AdapterType = 0x100
	TypeComputeOnly     AdapterType = 0x800
)

var typeNames = []struct {
	bit  AdapterType
	name string
}{
	{TypeRender, "render"},
	{TypeDisplay, "display"},
	{TypeSoftware, "software"},
	{TypePost, "post"},
	{TypeHybridDiscrete, "hybrid-discrete"},
	{TypeHybridIntegrate, "hybrid-integrated"},
	{TypeIndirectDisplay, "indirect-display"},
	{TypeParavirtualized, "paravirtualized"},
	{TypeACG, "acg"},
	{TypeComputeOnly, "compute-only"},
}

// ComputeOnly reports an MCDM adapter (NPU, datacenter GPU in compute mode).
func (t AdapterType) ComputeOnly() bool { return t&TypeComputeOnly != 0 }

// Software reports a software rasterizer rather than hardware.
func (t AdapterType) Software() bool { return t&TypeSoftware != 0 }

// String lists the set bits by name, comma separated.
func (t AdapterType) String() string {
	var names []string
	for _, n := range typeNames {
		if t&n.bit != 0 {
			names = append(names, n.name)
		}
	}
	if rest := t &^ knownTypes(); rest != 0 {
		names = append(names, fmt.Sprintf("0x%x", uint32(rest)))
	}
	return strings.Join(names, ",")
}

func knownTypes() AdapterType {
	var all AdapterType
	for _, n := range typeNames {
		all |= n.bit
	}
	return all
}

// PCIIDs are the ids of the physical adapter behind a paravirtual one.
type PCIIDs struct {
	Vendor    uint32
	Device    uint32
	SubVendor uint32
	SubSystem uint32
	Revision  uint32
}

// ACPIID is the ACPI hardware id the vendor and device ids spell, such as
// "QCOM0C36", or "" for PCI ids. Windows on Arm reports an ACPI device's
// four-character vendor and device ids as little-endian ASCII in the
// 32-bit fields (Qualcomm's vendor is "QCOM" in ASCII); PCI ids fit in 16 bits.
func (p PCIIDs) ACPIID() string {
	var b [8]byte
	binary.LittleEndian.PutUint32(b[0:], p.Vendor)
	binary.LittleEndian.PutUint32(b[4:], p.Device)
	for _, c := range b {
		if (c < 'A' || c > 'Z') && (c < '0' || c > '9') {
			return ""
		}
	}
	return string(b[:])
}

// String is the ids as people read them: the ACPI id ("QCOM0C36") where
// they spell one, else vendor:device in hex ("10de:2520").
func (p PCIIDs) String() string {
	if id := p.ACPIID(); id != "" {
		return id
	}
	return fmt.Sprintf("%04x:%04x", p.Vendor, p.Device)
}

// Adapter is one GPU or compute adapter as the Windows host describes it.
type Adapter struct {
	// Index is the adapter's position in the host's enumeration order,
	// the number users pass as a selector ("0", "1").
	Index       int
	LUID        LUID
	WDDMVersion uint32 // 3000 means WDDM 3.0
	Type        AdapterType
	PCI         PCIIDs
	// Description is the driver's adapter name; empty when the host does
	// not answer that query (it is informational only).
	Description string
	// DriverStorePath is the Windows path of the adapter's driver store
	// folder exactly as the host returned it; driverstore maps it to Linux.
	DriverStorePath string
	// DriverVersion and Memory are asked only with Options.Resources;
	// 0 when not asked or the host did not answer.
	DriverVersion DriverVersion
	Memory        Memory
}

// DriverVersion is a Windows driver version, four 16-bit fields packed
// high to low as UMD_DRIVER_VERSION returns it (LARGE_INTEGER).
type DriverVersion uint64

// String prints it as Windows' Device Manager does: "32.0.15.6094"; ""
// for 0 (unknown).
func (v DriverVersion) String() string {
	if v == 0 {
		return ""
	}
	return fmt.Sprintf("%d.%d.%d.%d", uint16(v>>48), uint16(v>>32), uint16(v>>16), uint16(v))
}

// Memory is D3DKMT_SEGMENTSIZEINFO, in bytes: what the adapter owns
// (DedicatedVideo, the VRAM of a discrete GPU, a small carve-out on an
// iGPU) and the system memory it may use.
type Memory struct {
	DedicatedVideo, DedicatedSystem, SharedSystem uint64
}

// AdapterError reports an adapter that was enumerated but could not be
// queried; enumeration keeps the others.
type AdapterError struct {
	Index int
	LUID  LUID
	Err   error
}

func (e *AdapterError) Error() string {
	return fmt.Sprintf("adapter %d (LUID %s): %v", e.Index, e.LUID, e.Err)
}

func (e *AdapterError) Unwrap() error { return e.Err }

// Enumeration is the result of one pass over /dev/dxg.
type Enumeration struct {
	Adapters []Adapter
	Skipped  []*AdapterError
	// Ioctl names the call that answered: "ENUMADAPTERS3" or, on kernels
	// that lack it, "ENUMADAPTERS2" (which never lists compute-only adapters).
	Ioctl string
	// Listed: Options.Known recognised the adapters, none was queried and
	// each Adapter holds only its Index and LUID.
	Listed bool
}

// WDDM formats a DRIVERVERSION answer (3100) as people and labels read it
// ("3.1"): the one place it is formatted.
func WDDM(v uint32) string {
	return strconv.FormatUint(uint64(v/1000), 10) + "." + strconv.FormatUint(uint64(v%1000/100), 10)
}
