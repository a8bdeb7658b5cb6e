package dxg

import "encoding/binary"

// ioctl request numbers, named as in the kernel's
// include/uapi/misc/d3dkmthk.h: _IOWR('G', nr, struct) on x86_64.
// abi_test.go recomputes them from the struct sizes.
const (
	LX_DXOPENADAPTERFROMLUID = 0xC00C4701 // struct d3dkmt_openadapterfromluid, 12 bytes
	LX_DXQUERYADAPTERINFO    = 0xC0184709 // struct d3dkmt_queryadapterinfo, 24 bytes
	LX_DXENUMADAPTERS2       = 0xC0104714 // struct d3dkmt_enumadapters2, 16 bytes
	LX_DXCLOSEADAPTER        = 0xC0044715 // struct d3dkmthandle, 4 bytes
	LX_DXENUMADAPTERS3       = 0xC018473E // struct d3dkmt_enumadapters3, 24 bytes
)

// Requests lists the ioctl numbers the emulator answers; the seccomp filter
// sends exactly these to the supervisor.
func Requests() []uint32 {
	return []uint32{
		LX_DXOPENADAPTERFROMLUID,
		LX_DXQUERYADAPTERINFO,
		LX_DXENUMADAPTERS2,
		LX_DXCLOSEADAPTER,
		LX_DXENUMADAPTERS3,
		LX_DXQUERYSTATISTICS,
		LX_DXQUERYVIDEOMEMORYINFO,
	}
}

// RequestName returns the short name used in counts and reports, or "" for
// a number that is not one of Requests.
func RequestName(req uint32) string {
	switch req {
	case LX_DXOPENADAPTERFROMLUID:
		return "OPENADAPTERFROMLUID"
	case LX_DXQUERYADAPTERINFO:
		return "QUERYADAPTERINFO"
	case LX_DXENUMADAPTERS2:
		return "ENUMADAPTERS2"
	case LX_DXCLOSEADAPTER:
		return "CLOSEADAPTER"
	case LX_DXENUMADAPTERS3:
		return "ENUMADAPTERS3"
	case LX_DXQUERYSTATISTICS:
		return "QUERYSTATISTICS"
	case LX_DXQUERYVIDEOMEMORYINFO:
		return "QUERYVIDEOMEMORYINFO"
	}
	return ""
}

// Structure sizes (x86_64, natural alignment).
const (
	sizeAdapterInfo         = 20 // handle, LUID{low,high}, num_sources, precise_present_regions
	sizeEnumAdapters2       = 16 // num_adapters, reserved, adapters pointer
	sizeEnumAdapters3       = 24 // filter u64, adapter_count, reserved, adapters pointer
	sizeOpenAdapterFromLUID = 12 // LUID, handle (out)
	sizeCloseAdapter        = 4  // handle
	sizeQueryAdapterInfo    = 24 // handle, type, private_data pointer, size, padding
)

// Driver limits.
const (
	// adaptersMax is D3DKMT_ADAPTERS_MAX: ENUMADAPTERS2 refuses a larger
	// capacity with EINVAL.
	adaptersMax = 64
	// enum3CapacityMax is the ENUMADAPTERS3 capacity above which the
	// driver's dxgkp_enum_adapters gives EINVAL; it has no 64 limit.
	enum3CapacityMax = 0xFFFF
	// maxPrivateData is DXG_MAX_VM_BUS_PACKET_SIZE: the largest
	// QUERYADAPTERINFO buffer the driver forwards to the host.
	maxPrivateData = 128 * 1024
	// filterIncludeComputeOnly is bit 0 of the ENUMADAPTERS3 filter.
	filterIncludeComputeOnly = 0x1
)

// KMTQUERYADAPTERINFOTYPE values (d3dkmthk.h) the host answers.
const (
	qaiGetSegmentSize           = 3
	qaiAdapterAddress           = 6
	qaiDriverVersion            = 13
	qaiAdapterType              = 15
	qaiUMDDriverVersion         = 18
	qaiPhysicalAdapterCount     = 30
	qaiPhysicalAdapterDeviceIDs = 31
	qaiQueryRegistry            = 48
	qaiKMDDriverVersion         = 49
	qaiAdapterTypeRender        = 57
	qaiDriverDescription        = 65
)

// Payload sizes of the fixed-size query types.
const (
	sizeAdapterAddress    = 12       // bus, device, function
	sizeDeviceIDs         = 28       // physical_adapter_index, then 6 u32 ids
	sizeDriverDescription = 4096 * 2 // WCHAR[4096], 2-byte UTF-16
	sizeSegmentSizeInfo   = 24       // D3DKMT_SEGMENTSIZEINFO: three u64
)

// D3DDDI_QUERYREGISTRY_INFO, raw 2-byte UTF-16 layout.
const (
	regQueryType       = 0
	regPhysicalAdapter = 532
	regOutputSize      = 536
	regStatus          = 540
	regOutput          = 544
	sizeRegistryInfo   = 552

	regTypeServiceKey      = 0
	regTypeAdapterKey      = 1
	regTypeDriverStorePath = 2
	regTypeDriverImagePath = 3

	regStatusSuccess        = 0
	regStatusBufferOverflow = 1
	regStatusFail           = 2
)

// Adapter type bits the driver rewrites on the way back from the host
// (dxgvmb_send_query_adapter_info): WSL has no display path.
const (
	typeDisplay          = 0x2
	typePost             = 0x8
	typeIndirectDisplay  = 0x40
	typeParavirtualized  = 0x80
	typeACG              = 0x100
	typeTimingsFromVidPN = 0x200
)

// Windows NTSTATUS values the host and old drivers return, as the kernel's
// drivers/hv/dxgkrnl/misc.h defines them (STATUS_NOT_FOUND is not there:
// the kernel has no translation for it).
const (
	statusSuccess                = 0x00000000
	statusTimeout                = 0x00000102 // a success code: NT_SUCCESS
	statusNotImplemented         = 0xC0000002
	statusInvalidHandle          = 0xC0000008
	statusInvalidParameter       = 0xC000000D
	statusNoMemory               = 0xC0000017
	statusIllegalInstruction     = 0xC000001D
	statusAccessDenied           = 0xC0000022
	statusBufferTooSmall         = 0xC0000023
	statusObjectTypeMismatch     = 0xC0000024
	statusObjectNameInvalid      = 0xC0000033
	statusObjectNameNotFound     = 0xC0000034
	statusObjectNameCollision    = 0xC0000035
	statusNotSupported           = 0xC00000BB
	statusNotFound               = 0xC0000225
	statusDeviceRemoved          = 0xC00002B6
	statusGraphicsAllocationBusy = 0xC01E0102
)

// handleBase and handleStep shape handle values like a real driver's
// (0x40000000, 0x40000040, ...).
const (
	handleBase = 0x40000000
	handleStep = 0x40
)

var le = binary.LittleEndian
