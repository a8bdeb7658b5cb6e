package dxcore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unicode/utf16"
)

// The kernel's _IOWR encoding (include/uapi/asm-generic/ioctl.h): direction
// in bits 30-31, argument size in bits 16-29, type in bits 8-15, number in
// bits 0-7. The kernel compares all 32 bits, so a wrong size is ENOTTY.
const (
	iocWrite     = 1
	iocRead      = 2
	iocSizeShift = 16
	iocTypeShift = 8
	iocDirShift  = 30

	// iowrG is _IOWR('G', 0, 0): every dxg request adds its size and number.
	iowrG = (iocRead|iocWrite)<<iocDirShift | 'G'<<iocTypeShift
)

// Argument sizes of the dxg structures on x86_64 (natural alignment).
const (
	sizeofAdapterInfo         = 20 // struct d3dkmt_adapterinfo
	sizeofEnumAdapters2       = 16 // struct d3dkmt_enumadapters2
	sizeofEnumAdapters3       = 24 // struct d3dkmt_enumadapters3
	sizeofOpenAdapterFromLUID = 12 // struct d3dkmt_openadapterfromluid
	sizeofCloseAdapter        = 4  // struct d3dkmt_closeadapter
	sizeofQueryAdapterInfo    = 24 // struct d3dkmt_queryadapterinfo
)

// Request numbers, each _IOWR('G', nr, struct), named as in the WSL kernel's
// include/uapi/misc/d3dkmthk.h.
const (
	// LX_DXOPENADAPTERFROMLUID opens a handle to the adapter with a LUID.
	LX_DXOPENADAPTERFROMLUID = iowrG | sizeofOpenAdapterFromLUID<<iocSizeShift | 0x01
	// LX_DXQUERYADAPTERINFO forwards one adapter query to the Windows host.
	LX_DXQUERYADAPTERINFO = iowrG | sizeofQueryAdapterInfo<<iocSizeShift | 0x09
	// LX_DXENUMADAPTERS2 lists adapters, never compute-only ones.
	LX_DXENUMADAPTERS2 = iowrG | sizeofEnumAdapters2<<iocSizeShift | 0x14
	// LX_DXCLOSEADAPTER closes a handle an enumerate or open returned.
	LX_DXCLOSEADAPTER = iowrG | sizeofCloseAdapter<<iocSizeShift | 0x15
	// LX_DXENUMADAPTERS3 lists adapters with a filter (compute-only too).
	LX_DXENUMADAPTERS3 = iowrG | sizeofEnumAdapters3<<iocSizeShift | 0x3e
)

// adaptersMax is D3DKMT_ADAPTERS_MAX: the most adapters one call returns,
// and the capacity every ENUMADAPTERS3 fill call must pass.
const adaptersMax = 64

// enumFilterComputeOnly is d3dkmt_enumadapters_filter.include_compute_only.
const enumFilterComputeOnly = 1 << 0

// Field offsets inside the argument structures.
const (
	offAdapterInfoHandle = 0
	offAdapterInfoLUID   = 4

	offEnum2Count    = 0
	offEnum2Adapters = 8

	offEnum3Filter   = 0
	offEnum3Count    = 8
	offEnum3Adapters = 16

	offQueryHandle = 0
	offQueryType   = 4
	offQueryData   = 8
	offQuerySize   = 16

	offCloseHandle = 0
)

// KMTQUERYADAPTERINFOTYPE values the enumeration uses.
const (
	qaiGetSegmentSize         = 3
	qaiDriverVersion          = 13
	qaiUMDDriverVersion       = 18
	qaiAdapterType            = 15
	qaiPhysicalAdapterDevIDs  = 31
	qaiQueryRegistry          = 48
	qaiAdapterTypeRender      = 57
	qaiDriverDescription      = 65
	sizeofDeviceIDs           = 28   // D3DKMT_QUERY_DEVICE_IDS
	sizeofSegmentSizeInfo     = 24   // D3DKMT_SEGMENTSIZEINFO: three u64
	sizeofDriverDescription   = 8192 // WCHAR[4096]
	maxPrivateDataSize        = 128 << 10
	offDeviceIDsPhysicalIndex = 0
	offDeviceIDsVendor        = 4
)

// D3DDDI_QUERYREGISTRY_INFO with 2-byte WCHARs, as the host reads it.
const (
	offRegQueryType    = 0
	offRegFlags        = 4
	offRegValueName    = 8
	offRegValueType    = 528
	offRegPhysIndex    = 532
	offRegOutputSize   = 536
	offRegStatus       = 540
	offRegOutput       = 544
	sizeofRegistryInfo = 552 // header plus the 8-byte output union, align 8

	regTypeDriverStorePath = 2

	regStatusSuccess        = 0
	regStatusBufferOverflow = 1
	regStatusFail           = 2

	// maxRegistryValue keeps the second request under the kernel's
	// 128 KiB private-data limit; a larger claim is a broken host.
	maxRegistryValue = maxPrivateDataSize - sizeofRegistryInfo
)

// adapterInfo is one entry of the array the enumerate calls fill.
type adapterInfo struct {
	handle uint32
	luid   LUID
}

func encodeEnumAdapters2(count uint32, adapters uint64) []byte {
	b := make([]byte, sizeofEnumAdapters2)
	binary.LittleEndian.PutUint32(b[offEnum2Count:], count)
	binary.LittleEndian.PutUint64(b[offEnum2Adapters:], adapters)
	return b
}

func decodeEnumAdapters2Count(b []byte) uint32 { return binary.LittleEndian.Uint32(b[offEnum2Count:]) }

func encodeEnumAdapters3(filter uint64, count uint32, adapters uint64) []byte {
	b := make([]byte, sizeofEnumAdapters3)
	binary.LittleEndian.PutUint64(b[offEnum3Filter:], filter)
	binary.LittleEndian.PutUint32(b[offEnum3Count:], count)
	binary.LittleEndian.PutUint64(b[offEnum3Adapters:], adapters)
	return b
}

func decodeEnumAdapters3Count(b []byte) uint32 { return binary.LittleEndian.Uint32(b[offEnum3Count:]) }

func encodeCloseAdapter(handle uint32) []byte {
	b := make([]byte, sizeofCloseAdapter)
	binary.LittleEndian.PutUint32(b[offCloseHandle:], handle)
	return b
}

func encodeQueryAdapterInfo(handle, typ uint32, data uint64, size uint32) []byte {
	b := make([]byte, sizeofQueryAdapterInfo)
	binary.LittleEndian.PutUint32(b[offQueryHandle:], handle)
	binary.LittleEndian.PutUint32(b[offQueryType:], typ)
	binary.LittleEndian.PutUint64(b[offQueryData:], data)
	binary.LittleEndian.PutUint32(b[offQuerySize:], size)
	return b
}

// decodeAdapterInfos reads the first n entries of an adapterinfo array; it
// never reads past b, whatever count the kernel claimed.
func decodeAdapterInfos(b []byte, n uint32) []adapterInfo {
	if max := uint32(len(b) / sizeofAdapterInfo); n > max {
		n = max
	}
	out := make([]adapterInfo, n)
	for i := range out {
		e := b[i*sizeofAdapterInfo:]
		out[i] = adapterInfo{
			handle: binary.LittleEndian.Uint32(e[offAdapterInfoHandle:]),
			luid: LUID{
				Low:  binary.LittleEndian.Uint32(e[offAdapterInfoLUID:]),
				High: int32(binary.LittleEndian.Uint32(e[offAdapterInfoLUID+4:])),
			},
		}
	}
	return out
}

// newDeviceIDsRequest asks for the ids of physical adapter 0: a paravirtual
// adapter in WSL always stands for exactly one physical GPU.
func newDeviceIDsRequest() []byte {
	b := make([]byte, sizeofDeviceIDs)
	binary.LittleEndian.PutUint32(b[offDeviceIDsPhysicalIndex:], 0)
	return b
}

func decodeDeviceIDs(b []byte) (PCIIDs, error) {
	if len(b) < sizeofDeviceIDs {
		return PCIIDs{}, fmt.Errorf("device ids reply is %d bytes, want %d", len(b), sizeofDeviceIDs)
	}
	v := b[offDeviceIDsVendor:]
	return PCIIDs{
		Vendor:    binary.LittleEndian.Uint32(v[0:]),
		Device:    binary.LittleEndian.Uint32(v[4:]),
		SubVendor: binary.LittleEndian.Uint32(v[8:]),
		SubSystem: binary.LittleEndian.Uint32(v[12:]),
		Revision:  binary.LittleEndian.Uint32(v[16:]),
	}, nil
}

func decodeUint32(b []byte) (uint32, error) {
	if len(b) < 4 {
		return 0, fmt.Errorf("reply is %d bytes, want 4", len(b))
	}
	return binary.LittleEndian.Uint32(b), nil
}

// newRegistryRequest builds a DRIVERSTOREPATH query with room for valueSize
// bytes of answer beyond the fixed 552.
func newRegistryRequest(valueSize uint32) []byte {
	b := make([]byte, sizeofRegistryInfo+int(valueSize))
	binary.LittleEndian.PutUint32(b[offRegQueryType:], regTypeDriverStorePath)
	return b
}

var errRegistryFail = errors.New("the host could not read the driver store path")

// decodeRegistry interprets one QUERYREGISTRY reply. The status field, not
// the ioctl result, says what happened: a too-small buffer is a successful
// ioctl with status BUFFER_OVERFLOW and need set to the bytes required.
func decodeRegistry(b []byte) (value string, need uint32, err error) {
	if len(b) < offRegOutput {
		return "", 0, fmt.Errorf("registry reply is %d bytes, want at least %d", len(b), offRegOutput)
	}
	size := binary.LittleEndian.Uint32(b[offRegOutputSize:])
	switch status := binary.LittleEndian.Uint32(b[offRegStatus:]); status {
	case regStatusSuccess:
		payload := b[offRegOutput:]
		if uint64(size) > uint64(len(payload)) {
			return "", 0, fmt.Errorf("registry reply claims %d bytes of value in a %d-byte buffer", size, len(payload))
		}
		return decodeUTF16(payload[:size]), 0, nil
	case regStatusBufferOverflow:
		if size == 0 || size > maxRegistryValue {
			return "", 0, fmt.Errorf("registry reply asks for a %d-byte buffer", size)
		}
		return "", size, nil
	case regStatusFail:
		return "", 0, errRegistryFail
	default:
		return "", 0, fmt.Errorf("registry reply has unknown status %d", status)
	}
}

// decodeUTF16 decodes little-endian UTF-16 up to the first NUL unit; an odd
// trailing byte is ignored and unpaired surrogates become U+FFFD.
func decodeUTF16(b []byte) string {
	units := make([]uint16, 0, len(b)/2)
	for i := 0; i+1 < len(b); i += 2 {
		u := binary.LittleEndian.Uint16(b[i:])
		if u == 0 {
			break
		}
		units = append(units, u)
	}
	return string(utf16.Decode(units))
}

// decodeSegmentSizes reads D3DKMT_SEGMENTSIZEINFO: dedicated video,
// dedicated system and shared system memory, in bytes.
func decodeSegmentSizes(b []byte) Memory {
	return Memory{
		DedicatedVideo:  binary.LittleEndian.Uint64(b[0:]),
		DedicatedSystem: binary.LittleEndian.Uint64(b[8:]),
		SharedSystem:    binary.LittleEndian.Uint64(b[16:]),
	}
}
