package dxcore

import (
	"encoding/binary"
	"testing"
)

// kernelIOWR is _IOWR(type, nr, size) exactly as include/uapi/asm-generic/ioctl.h
// spells it, written out independently of the package's constants.
func kernelIOWR(typ, nr, size uint32) uint32 {
	const (
		nrShift   = 0
		typeShift = nrShift + 8
		sizeShift = typeShift + 8
		dirShift  = sizeShift + 14
		dirRW     = 1 | 2 // _IOC_WRITE | _IOC_READ
	)
	return dirRW<<dirShift | size<<sizeShift | typ<<typeShift | nr<<nrShift
}

func TestIoctlNumbers(t *testing.T) {
	// Literal values and sizes from dxg-uapi.md (checked against gcc there).
	tests := []struct {
		name    string
		got     uint32
		nr      uint32
		size    uint32
		literal uint32
	}{
		{"LX_DXOPENADAPTERFROMLUID", LX_DXOPENADAPTERFROMLUID, 0x01, 12, 0xC00C4701},
		{"LX_DXQUERYADAPTERINFO", LX_DXQUERYADAPTERINFO, 0x09, 24, 0xC0184709},
		{"LX_DXENUMADAPTERS2", LX_DXENUMADAPTERS2, 0x14, 16, 0xC0104714},
		{"LX_DXCLOSEADAPTER", LX_DXCLOSEADAPTER, 0x15, 4, 0xC0044715},
		{"LX_DXENUMADAPTERS3", LX_DXENUMADAPTERS3, 0x3e, 24, 0xC018473E},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.literal {
				t.Errorf("constant = %#x, want %#x", tt.got, tt.literal)
			}
			if k := kernelIOWR('G', tt.nr, tt.size); k != tt.literal {
				t.Errorf("_IOWR('G', %#x, %d) = %#x, want %#x", tt.nr, tt.size, k, tt.literal)
			}
		})
	}
}

func TestStructSizes(t *testing.T) {
	tests := []struct {
		name string
		got  int
		want int
	}{
		{"adapterinfo", sizeofAdapterInfo, 20},
		{"enumadapters2", len(encodeEnumAdapters2(0, 0)), 16},
		{"enumadapters3", len(encodeEnumAdapters3(0, 0, 0)), 24},
		{"openadapterfromluid", sizeofOpenAdapterFromLUID, 12},
		{"closeadapter", len(encodeCloseAdapter(0)), 4},
		{"queryadapterinfo", len(encodeQueryAdapterInfo(0, 0, 0, 0)), 24},
		{"query device ids", len(newDeviceIDsRequest()), 28},
		{"driver description", sizeofDriverDescription, 4096 * 2},
		{"queryregistry info", len(newRegistryRequest(0)), 552},
		{"queryregistry info + value", len(newRegistryRequest(100)), 652},
		// What Windows' own paravirtualized-adapter code sends the host
		// for a driver store path: 552 + 260 UTF-16 units.
		{"first queryregistry request", len(newRegistryRequest(registryFirstValueSize)), 1072},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("size = %d, want %d", tt.got, tt.want)
			}
		})
	}
}

// field reads a little-endian field of 4 or 8 bytes at a literal offset.
func field(b []byte, off, size int) uint64 {
	if size == 8 {
		return binary.LittleEndian.Uint64(b[off:])
	}
	return uint64(binary.LittleEndian.Uint32(b[off:]))
}

func TestStructOffsets(t *testing.T) {
	// Each encoder gets distinct values; the test reads them back at the
	// offsets the kernel header gives, so a swapped or shifted field fails.
	tests := []struct {
		name string
		buf  []byte
		off  int
		size int
		want uint64
	}{
		{"enumadapters2.num_adapters", encodeEnumAdapters2(7, 0x1122334455667788), 0, 4, 7},
		{"enumadapters2.reserved", encodeEnumAdapters2(7, 0x1122334455667788), 4, 4, 0},
		{"enumadapters2.adapters", encodeEnumAdapters2(7, 0x1122334455667788), 8, 8, 0x1122334455667788},
		{"enumadapters3.filter", encodeEnumAdapters3(0x3, 9, 0xaabbccdd00112233), 0, 8, 0x3},
		{"enumadapters3.adapter_count", encodeEnumAdapters3(0x3, 9, 0xaabbccdd00112233), 8, 4, 9},
		{"enumadapters3.reserved", encodeEnumAdapters3(0x3, 9, 0xaabbccdd00112233), 12, 4, 0},
		{"enumadapters3.adapters", encodeEnumAdapters3(0x3, 9, 0xaabbccdd00112233), 16, 8, 0xaabbccdd00112233},
		{"closeadapter.handle", encodeCloseAdapter(0x40000041), 0, 4, 0x40000041},
		{"queryadapterinfo.handle", encodeQueryAdapterInfo(0x40000041, 48, 0xdead0000beef, 552), 0, 4, 0x40000041},
		{"queryadapterinfo.type", encodeQueryAdapterInfo(0x40000041, 48, 0xdead0000beef, 552), 4, 4, 48},
		{"queryadapterinfo.private_data", encodeQueryAdapterInfo(0x40000041, 48, 0xdead0000beef, 552), 8, 8, 0xdead0000beef},
		{"queryadapterinfo.private_data_size", encodeQueryAdapterInfo(0x40000041, 48, 0xdead0000beef, 552), 16, 4, 552},
		{"queryadapterinfo.padding", encodeQueryAdapterInfo(0x40000041, 48, 0xdead0000beef, 552), 20, 4, 0},
		{"queryregistry.query_type", newRegistryRequest(0), 0, 4, 2},
		{"queryregistry.flags", newRegistryRequest(0), 4, 4, 0},
		{"queryregistry.value_type", newRegistryRequest(0), 528, 4, 0},
		{"queryregistry.physical_adapter_index", newRegistryRequest(0), 532, 4, 0},
		{"queryregistry.output_value_size", newRegistryRequest(0), 536, 4, 0},
		{"queryregistry.status", newRegistryRequest(0), 540, 4, 0},
		// output_value_size is the host's answer, never an input.
		{"first queryregistry.output_value_size", newRegistryRequest(registryFirstValueSize), 536, 4, 0},
		{"deviceids.physical_adapter_index", newDeviceIDsRequest(), 0, 4, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := field(tt.buf, tt.off, tt.size); got != tt.want {
				t.Errorf("field at %d = %#x, want %#x", tt.off, got, tt.want)
			}
		})
	}
}

func TestRegistryOffsetsMatchDoc(t *testing.T) {
	// The decoder uses named offsets; pin them to the documented layout.
	tests := []struct {
		name      string
		got, want int
	}{
		{"query_type", offRegQueryType, 0},
		{"flags", offRegFlags, 4},
		{"value_name", offRegValueName, 8},
		{"value_type", offRegValueType, 528},
		{"physical_adapter_index", offRegPhysIndex, 532},
		{"output_value_size", offRegOutputSize, 536},
		{"status", offRegStatus, 540},
		{"output", offRegOutput, 544},
		{"value_name ends where value_type starts", offRegValueName + 260*2, offRegValueType},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("offset = %d, want %d", tt.got, tt.want)
			}
		})
	}
}

func TestDecodeEnumCounts(t *testing.T) {
	b2 := make([]byte, 16)
	binary.LittleEndian.PutUint32(b2[0:], 3)
	if got := decodeEnumAdapters2Count(b2); got != 3 {
		t.Errorf("enumadapters2 count = %d, want 3", got)
	}
	b3 := make([]byte, 24)
	binary.LittleEndian.PutUint64(b3[0:], 0xffffffffffffffff) // filter must not leak into the count
	binary.LittleEndian.PutUint32(b3[8:], 5)
	if got := decodeEnumAdapters3Count(b3); got != 5 {
		t.Errorf("enumadapters3 count = %d, want 5", got)
	}
}

func TestDecodeAdapterInfos(t *testing.T) {
	// Two entries laid out by hand at the adapterinfo offsets: handle @0,
	// LUID low @4, LUID high @8, num_sources @12, precise_present @16.
	b := make([]byte, 3*20)
	put := func(i int, handle, low, high, sources uint32) {
		e := b[i*20:]
		binary.LittleEndian.PutUint32(e[0:], handle)
		binary.LittleEndian.PutUint32(e[4:], low)
		binary.LittleEndian.PutUint32(e[8:], high)
		binary.LittleEndian.PutUint32(e[12:], sources)
		binary.LittleEndian.PutUint32(e[16:], 1)
	}
	put(0, 0x40000000, 0x1a1d77, 0, 4)
	put(1, 0x40000040, 0x4486d1, 0xffffffff, 0)
	tests := []struct {
		name string
		buf  []byte
		n    uint32
		want []adapterInfo
	}{
		{"two of three slots", b, 2, []adapterInfo{
			{handle: 0x40000000, luid: LUID{Low: 0x1a1d77}},
			{handle: 0x40000040, luid: LUID{Low: 0x4486d1, High: -1}},
		}},
		{"zero", b, 0, []adapterInfo{}},
		{"count beyond the buffer is cut", b[:20], 64, []adapterInfo{
			{handle: 0x40000000, luid: LUID{Low: 0x1a1d77}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := decodeAdapterInfos(tt.buf, tt.n)
			if len(got) != len(tt.want) {
				t.Fatalf("got %d entries, want %d", len(got), len(tt.want))
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("entry %d = %+v, want %+v", i, got[i], tt.want[i])
				}
			}
			// The encoder is the decoder's inverse (fakes rely on it).
			again := make([]byte, len(got)*20)
			encodeAdapterInfos(again, got)
			if back := decodeAdapterInfos(again, uint32(len(got))); len(got) > 0 && back[len(back)-1] != got[len(got)-1] {
				t.Errorf("round trip = %+v, want %+v", back, got)
			}
		})
	}
}

// encodeAdapterInfos is the inverse of decodeAdapterInfos; tests and fakes
// use it to play the kernel.
func encodeAdapterInfos(dst []byte, infos []adapterInfo) {
	for i, a := range infos {
		e := dst[i*sizeofAdapterInfo:]
		binary.LittleEndian.PutUint32(e[offAdapterInfoHandle:], a.handle)
		binary.LittleEndian.PutUint32(e[offAdapterInfoLUID:], a.luid.Low)
		binary.LittleEndian.PutUint32(e[offAdapterInfoLUID+4:], uint32(a.luid.High))
	}
}
