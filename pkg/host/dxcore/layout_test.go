package dxcore

import (
	"runtime"
	"testing"
)

// The dxg structures as the WSL kernel's include/uapi/misc/d3dkmthk.h (and,
// for what travels to the host unchanged, Windows' d3dukmdt.h and
// d3dkmthk.h) declare them, field by field with their C types, laid out
// here by the C rules of the architecture the test runs on. The expected
// sizes and offsets come from these shapes, never from the package's own
// encoders: run under GOARCH=amd64 and GOARCH=arm64 (make test-arm64), the
// test shows both architectures lay every structure out the same way, and
// the package's constants match it.

// cType is a C scalar type of the uapi headers.
type cType int

const (
	cU8 cType = iota
	cU16
	cU32 // __u32, enum, struct d3dkmthandle (a union of bit fields and a __u32)
	cU64 // __u64, and the user pointers the headers declare as __u64
)

// cABI is the size and alignment of each cType on one architecture.
type cABI map[cType]int

// cABIs holds the Linux C ABIs the project ships for: x86-64 psABI and
// AAPCS64, both LP64 with every scalar aligned to its size.
func cABIs() map[string]cABI {
	return map[string]cABI{
		"amd64": {cU8: 1, cU16: 2, cU32: 4, cU64: 8},
		"arm64": {cU8: 1, cU16: 2, cU32: 4, cU64: 8},
	}
}

// cField is one member: a scalar, an array of scalars, or a nested struct.
type cField struct {
	name  string
	typ   cType
	count int      // array length; 0 or 1 for one
	sub   []cField // a nested struct or, with union set, a union
	union bool     // sub are the members of a union
	size  int      // an opaque member of this many bytes (alignment align)
	align int
}

// cLayout lays fields out as a C compiler does: each member at the next
// multiple of its alignment, the whole padded to the largest alignment.
// It returns each member's offset by dotted name, the size and alignment.
func cLayout(abi cABI, fields []cField, union bool) (offs map[string]int, size, align int) {
	offs = map[string]int{}
	align = 1
	off := 0
	for _, f := range fields {
		var fsize, falign int
		var sub map[string]int
		switch {
		case f.sub != nil:
			sub, fsize, falign = cLayout(abi, f.sub, f.union)
		case f.size != 0:
			fsize, falign = f.size, f.align
		default:
			fsize, falign = abi[f.typ], abi[f.typ]
			if f.count > 1 {
				fsize *= f.count
			}
		}
		if union {
			off = 0
		} else {
			off = (off + falign - 1) / falign * falign
		}
		offs[f.name] = off
		for k, v := range sub {
			offs[f.name+"."+k] = off + v
		}
		if union {
			size = max(size, fsize)
		} else {
			off += fsize
			size = off
		}
		align = max(align, falign)
	}
	size = (size + align - 1) / align * align
	return offs, size, align
}

// winluid is struct winluid {__u32 a; __u32 b;}.
func winluid() []cField { return []cField{{name: "a", typ: cU32}, {name: "b", typ: cU32}} }

// headerShapes are the structures the package encodes, as declared.
func headerShapes() map[string][]cField {
	winluid := winluid()
	return map[string][]cField{
		"d3dkmt_adapterinfo": {
			{name: "adapter_handle", typ: cU32},
			{name: "adapter_luid", sub: winluid},
			{name: "num_of_sources", typ: cU32},
			{name: "present_move_regions_preferred", typ: cU32},
		},
		"d3dkmt_enumadapters2": {
			{name: "num_adapters", typ: cU32},
			{name: "reserved", typ: cU32},
			{name: "adapters", typ: cU64},
		},
		"d3dkmt_enumadapters3": {
			// union d3dkmt_enumadapters_filter { __u64 value; struct {bits} }
			{name: "filter", typ: cU64},
			{name: "adapter_count", typ: cU32},
			{name: "reserved", typ: cU32},
			{name: "adapters", typ: cU64},
		},
		"d3dkmt_openadapterfromluid": {
			{name: "adapter_luid", sub: winluid},
			{name: "adapter_handle", typ: cU32},
		},
		"d3dkmt_closeadapter": {
			{name: "adapter_handle", typ: cU32},
		},
		"d3dkmt_queryadapterinfo": {
			{name: "adapter", typ: cU32},
			{name: "type", typ: cU32},
			{name: "private_data", typ: cU64},
			{name: "private_data_size", typ: cU32},
		},
		// D3DKMT_QUERY_DEVICE_IDS: the index, then D3DKMT_DEVICE_IDS.
		"d3dkmt_query_device_ids": {
			{name: "physical_adapter_index", typ: cU32},
			{name: "device_ids", sub: []cField{
				{name: "vendor", typ: cU32}, {name: "device", typ: cU32}, {name: "subvendor", typ: cU32},
				{name: "subsystem", typ: cU32}, {name: "revision", typ: cU32}, {name: "bus_type", typ: cU32},
			}},
		},
		// D3DDDI_QUERYREGISTRY_INFO with Windows' 2-byte WCHAR, as the host
		// reads it; MAX_PATH is 260.
		"d3dddi_queryregistry_info": {
			{name: "query_type", typ: cU32},
			{name: "query_flags", typ: cU32},
			{name: "value_name", typ: cU16, count: 260},
			{name: "value_type", typ: cU32},
			{name: "physical_adapter_index", typ: cU32},
			{name: "output_value_size", typ: cU32},
			{name: "status", typ: cU32},
			{name: "output", union: true, sub: []cField{
				{name: "dword", typ: cU32}, {name: "qword", typ: cU64}, {name: "string", typ: cU16}, {name: "binary", typ: cU8},
			}},
		},
		// struct d3dkmt_querystatistics: a 0x328-byte union whose struct is
		// the type, the LUID, the process, the 0x308-byte result (8-aligned:
		// it holds __u64 counters) and the query selector (a union of u32s).
		"d3dkmt_querystatistics": {
			{name: "u", union: true, sub: []cField{
				{name: "s", sub: []cField{
					{name: "type", typ: cU32},
					{name: "adapter_luid", sub: winluid},
					{name: "process", typ: cU64},
					{name: "result", size: 0x308, align: 8},
					{name: "query", typ: cU32},
				}},
				{name: "size", typ: cU8, count: 0x328},
			}},
		},
		"d3dkmt_queryvideomemoryinfo": {
			{name: "process", typ: cU64},
			{name: "adapter", typ: cU32},
			{name: "memory_segment_group", typ: cU32},
			{name: "budget", typ: cU64},
			{name: "current_usage", typ: cU64},
			{name: "current_reservation", typ: cU64},
			{name: "available_for_reservation", typ: cU64},
			{name: "physical_adapter_index", typ: cU32},
		},
	}
}

func TestLayoutFromHeaderShapes(t *testing.T) {
	abi, ok := cABIs()[runtime.GOARCH]
	if !ok {
		t.Skipf("no C ABI table for GOARCH=%s: the project builds for amd64 and arm64", runtime.GOARCH)
	}
	layout := func(name string) (map[string]int, int) {
		shape, ok := headerShapes()[name]
		if !ok {
			t.Fatalf("no shape for %s", name)
		}
		offs, size, _ := cLayout(abi, shape, false)
		return offs, size
	}
	size := func(name string) int { _, s := layout(name); return s }
	off := func(name, field string) int {
		offs, _ := layout(name)
		o, ok := offs[field]
		if !ok {
			t.Fatalf("%s has no field %s", name, field)
		}
		return o
	}
	tests := []struct {
		name      string
		got, want int
	}{
		{"sizeof d3dkmt_adapterinfo", sizeofAdapterInfo, size("d3dkmt_adapterinfo")},
		{"sizeof d3dkmt_enumadapters2", sizeofEnumAdapters2, size("d3dkmt_enumadapters2")},
		{"sizeof d3dkmt_enumadapters3", sizeofEnumAdapters3, size("d3dkmt_enumadapters3")},
		{"sizeof d3dkmt_openadapterfromluid", sizeofOpenAdapterFromLUID, size("d3dkmt_openadapterfromluid")},
		{"sizeof d3dkmt_closeadapter", sizeofCloseAdapter, size("d3dkmt_closeadapter")},
		{"sizeof d3dkmt_queryadapterinfo", sizeofQueryAdapterInfo, size("d3dkmt_queryadapterinfo")},
		{"sizeof D3DKMT_QUERY_DEVICE_IDS", sizeofDeviceIDs, size("d3dkmt_query_device_ids")},
		{"sizeof D3DDDI_QUERYREGISTRY_INFO", sizeofRegistryInfo, size("d3dddi_queryregistry_info")},
		{"sizeof d3dkmt_querystatistics", sizeofQueryStatistics, size("d3dkmt_querystatistics")},
		{"sizeof d3dkmt_queryvideomemoryinfo", sizeofQueryVideoMemInfo, size("d3dkmt_queryvideomemoryinfo")},

		{"adapterinfo.adapter_handle", offAdapterInfoHandle, off("d3dkmt_adapterinfo", "adapter_handle")},
		{"adapterinfo.adapter_luid", offAdapterInfoLUID, off("d3dkmt_adapterinfo", "adapter_luid")},
		{"enumadapters2.num_adapters", offEnum2Count, off("d3dkmt_enumadapters2", "num_adapters")},
		{"enumadapters2.adapters", offEnum2Adapters, off("d3dkmt_enumadapters2", "adapters")},
		{"enumadapters3.filter", offEnum3Filter, off("d3dkmt_enumadapters3", "filter")},
		{"enumadapters3.adapter_count", offEnum3Count, off("d3dkmt_enumadapters3", "adapter_count")},
		{"enumadapters3.adapters", offEnum3Adapters, off("d3dkmt_enumadapters3", "adapters")},
		{"closeadapter.adapter_handle", offCloseHandle, off("d3dkmt_closeadapter", "adapter_handle")},
		{"queryadapterinfo.adapter", offQueryHandle, off("d3dkmt_queryadapterinfo", "adapter")},
		{"queryadapterinfo.type", offQueryType, off("d3dkmt_queryadapterinfo", "type")},
		{"queryadapterinfo.private_data", offQueryData, off("d3dkmt_queryadapterinfo", "private_data")},
		{"queryadapterinfo.private_data_size", offQuerySize, off("d3dkmt_queryadapterinfo", "private_data_size")},
		{"query_device_ids.physical_adapter_index", offDeviceIDsPhysicalIndex, off("d3dkmt_query_device_ids", "physical_adapter_index")},
		{"query_device_ids.device_ids.vendor", offDeviceIDsVendor, off("d3dkmt_query_device_ids", "device_ids.vendor")},
		{"queryregistry.query_type", offRegQueryType, off("d3dddi_queryregistry_info", "query_type")},
		{"queryregistry.query_flags", offRegFlags, off("d3dddi_queryregistry_info", "query_flags")},
		{"queryregistry.value_name", offRegValueName, off("d3dddi_queryregistry_info", "value_name")},
		{"queryregistry.value_type", offRegValueType, off("d3dddi_queryregistry_info", "value_type")},
		{"queryregistry.physical_adapter_index", offRegPhysIndex, off("d3dddi_queryregistry_info", "physical_adapter_index")},
		{"queryregistry.output_value_size", offRegOutputSize, off("d3dddi_queryregistry_info", "output_value_size")},
		{"queryregistry.status", offRegStatus, off("d3dddi_queryregistry_info", "status")},
		{"queryregistry.output", offRegOutput, off("d3dddi_queryregistry_info", "output")},
		{"querystatistics.type", offStatsType, off("d3dkmt_querystatistics", "u.s.type")},
		{"querystatistics.adapter_luid", offStatsLUID, off("d3dkmt_querystatistics", "u.s.adapter_luid")},
		{"querystatistics.process", offStatsProcess, off("d3dkmt_querystatistics", "u.s.process")},
		{"querystatistics.result", offStatsResult, off("d3dkmt_querystatistics", "u.s.result")},
		{"querystatistics.query", offStatsQuery, off("d3dkmt_querystatistics", "u.s.query")},
		{"queryvideomemoryinfo.process", offVidMemProcess, off("d3dkmt_queryvideomemoryinfo", "process")},
		{"queryvideomemoryinfo.adapter", offVidMemAdapter, off("d3dkmt_queryvideomemoryinfo", "adapter")},
		{"queryvideomemoryinfo.memory_segment_group", offVidMemGroup, off("d3dkmt_queryvideomemoryinfo", "memory_segment_group")},
		{"queryvideomemoryinfo.budget", offVidMemBudget, off("d3dkmt_queryvideomemoryinfo", "budget")},
		{"queryvideomemoryinfo.current_usage", offVidMemUsage, off("d3dkmt_queryvideomemoryinfo", "current_usage")},
		{"queryvideomemoryinfo.current_reservation", offVidMemReservation, off("d3dkmt_queryvideomemoryinfo", "current_reservation")},
		{"queryvideomemoryinfo.available_for_reservation", offVidMemAvailReserve, off("d3dkmt_queryvideomemoryinfo", "available_for_reservation")},
		{"queryvideomemoryinfo.physical_adapter_index", offVidMemPhysicalAdapter, off("d3dkmt_queryvideomemoryinfo", "physical_adapter_index")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("%s: package says %d, the header's shape on %s gives %d", tt.name, tt.got, runtime.GOARCH, tt.want)
			}
		})
	}
}

// TestLayoutRules checks the layout rules themselves on shapes whose
// padding is the point, so a rule broken in cLayout cannot make the test
// above agree with a wrong constant.
func TestLayoutRules(t *testing.T) {
	abi := cABIs()["amd64"]
	tests := []struct {
		name     string
		fields   []cField
		union    bool
		wantOffs map[string]int
		wantSize int
	}{
		{"u64 after u32 is padded", []cField{{name: "a", typ: cU32}, {name: "b", typ: cU64}}, false, map[string]int{"a": 0, "b": 8}, 16},
		{"tail padded to alignment", []cField{{name: "a", typ: cU64}, {name: "b", typ: cU32}}, false, map[string]int{"a": 0, "b": 8}, 16},
		{"u32 struct packs", []cField{{name: "a", typ: cU32}, {name: "l", sub: winluid()}}, false, map[string]int{"a": 0, "l": 4, "l.b": 8}, 12},
		{"array of u16", []cField{{name: "a", typ: cU16, count: 3}, {name: "b", typ: cU32}}, false, map[string]int{"a": 0, "b": 8}, 12},
		{"union is its largest member", []cField{{name: "a", typ: cU32}, {name: "b", typ: cU8, count: 13}}, true, map[string]int{"a": 0, "b": 0}, 16},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			offs, size, _ := cLayout(abi, tt.fields, tt.union)
			for k, v := range tt.wantOffs {
				if offs[k] != v {
					t.Errorf("offset of %s = %d, want %d", k, offs[k], v)
				}
			}
			if size != tt.wantSize {
				t.Errorf("size = %d, want %d", size, tt.wantSize)
			}
		})
	}
}
