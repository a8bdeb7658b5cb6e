package dxcore

import (
	"encoding/binary"
	"fmt"
)

// Statistics structures. Wire form: the WSL kernel's
// include/uapi/misc/d3dkmthk.h (struct d3dkmt_querystatistics: a 0x328-byte
// union of {type u32; winluid adapter_luid; u64 process; result[0x308]},
// struct d3dkmt_queryvideomemoryinfo). The contents of result and of the
// query selector after it are Windows' D3DKMT_QUERYSTATISTICS from the
// Windows SDK's shared/d3dkmthk.h, which the kernel forwards to the host
// unchanged (dxgvmb_send_query_statistics). fastfetch's
// src/detection/gpu/d3dkmthk.h static_asserts the same 0x328 on 64-bit.
const (
	sizeofQueryStatistics    = 0x328 // struct d3dkmt_querystatistics
	sizeofQueryVideoMemInfo  = 56    // struct d3dkmt_queryvideomemoryinfo
	sizeofStatisticsResult   = 0x308 // struct d3dkmt_querystatistics_result
	sizeofNodeMetadata       = 0x4e  // D3DKMT_NODEMETADATA, #pragma pack(1)
	nodeMetadataNameUnits    = 32    // DXGK_MAX_METADATA_NAME_LENGTH
	qaiNodeMetadata          = 25    // KMTQAITYPE_NODEMETADATA
	sizeofUMDDriverVersion   = 8     // D3DKMT_UMD_DRIVER_VERSION (LARGE_INTEGER)
	offStatsType             = 0
	offStatsLUID             = 4
	offStatsProcess          = 16
	offStatsResult           = 24
	offStatsQuery            = offStatsResult + sizeofStatisticsResult // 0x320: QuerySegment/QueryNode/...
	offVidMemProcess         = 0
	offVidMemAdapter         = 8
	offVidMemGroup           = 12
	offVidMemBudget          = 16
	offVidMemUsage           = 24
	offVidMemReservation     = 32
	offVidMemAvailReserve    = 40
	offVidMemPhysicalAdapter = 48
)

// Request numbers for the statistics calls, named as in the kernel header.
const (
	// LX_DXQUERYVIDEOMEMORYINFO is the caller's own budget and usage for
	// one segment group; the kernel refuses another process with EINVAL.
	LX_DXQUERYVIDEOMEMORYINFO = iowrG | sizeofQueryVideoMemInfo<<iocSizeShift | 0x0a
	// LX_DXQUERYSTATISTICS forwards a D3DKMT_QUERYSTATISTICS to the host.
	LX_DXQUERYSTATISTICS = iowrG | sizeofQueryStatistics<<iocSizeShift | 0x43
)

// D3DKMT_QUERYSTATISTICS_TYPE values (d3dkmthk.h; the kernel's enum
// d3dkmt_querystatistics_type has the same numbers).
const (
	statsAdapter             = 0
	statsSegment             = 3
	statsNode                = 5
	statsProcessNode         = 6
	statsProcessSegmentGroup = 9
)

// Result offsets inside D3DKMT_QUERYSTATISTICS_RESULT, from the SDK
// structures (natural alignment, x86_64):
//
//	_ADAPTER_INFORMATION: ULONG NbSegments @0, ULONG NodeCount @4
//	_SEGMENT_INFORMATION: ULONGLONG CommitLimit @0, BytesCommitted @8,
//	  BytesResident @16, _MEMORY {ULONGLONG TotalBytesEvicted @24,
//	  ULONG AllocsCommitted @32, AllocsResident @36}, ULONG Aperture @40
//	_NODE_INFORMATION: GlobalInformation (a _PROCESS_NODE_INFORMATION)
//	  first, whose LARGE_INTEGER RunningTime (100 ns units) is @0
//	_PROCESS_SEGMENT_GROUP_INFORMATION: ULONGLONG Budget @0,
//	  Requested @8, Usage @16, Demoted[5] @24
const (
	resAdapterNbSegments   = 0
	resAdapterNodeCount    = 4
	resSegmentCommitLimit  = 0
	resSegmentCommitted    = 8
	resSegmentResident     = 16
	resSegmentAperture     = 40
	resNodeRunningTime     = 0
	resNodeContextSwitch   = 8
	resGroupBudget         = 0
	resGroupRequested      = 8
	resGroupUsage          = 16
	resProcessNodeRunning  = 0
	offNodeMetaOrdinal     = 0 // low word node ordinal, high word physical adapter
	offNodeMetaEngineType  = 4
	offNodeMetaName        = 8
	offNodeMetaFlags       = 72
	offNodeMetaGpuMmu      = 76
	offNodeMetaIoMmu       = 77
	maxSegments            = 32 // D3DKMT_MAX_SEGMENT_COUNT
	maxNodes               = 64 // well above any driver's engines; a larger count is a broken host
	maxPlausibleMemory     = 1 << 50
	runningTimeUnitNanosec = 100
)

// SegmentGroup is D3DKMT_MEMORY_SEGMENT_GROUP.
type SegmentGroup uint32

// Segment groups: local is the adapter's own memory (VRAM on a discrete
// GPU), non-local the system memory it can reach.
const (
	SegmentGroupLocal    SegmentGroup = 0
	SegmentGroupNonLocal SegmentGroup = 1
)

func (g SegmentGroup) String() string {
	switch g {
	case SegmentGroupLocal:
		return "local"
	case SegmentGroupNonLocal:
		return "nonlocal"
	}
	return fmt.Sprintf("group%d", uint32(g))
}

// encodeQueryStatistics builds one request: typ, the adapter, the process
// (a Linux pid on kernels that resolve it, else 0 for the caller) and the
// query selector (segment id, node id or segment group).
func encodeQueryStatistics(typ uint32, luid LUID, process uint64, query uint32) []byte {
	b := make([]byte, sizeofQueryStatistics)
	binary.LittleEndian.PutUint32(b[offStatsType:], typ)
	binary.LittleEndian.PutUint32(b[offStatsLUID:], luid.Low)
	binary.LittleEndian.PutUint32(b[offStatsLUID+4:], uint32(luid.High))
	binary.LittleEndian.PutUint64(b[offStatsProcess:], process)
	binary.LittleEndian.PutUint32(b[offStatsQuery:], query)
	return b
}

// statsResult returns the result union of a reply, or an error when the
// reply is not a whole structure.
func statsResult(b []byte) ([]byte, error) {
	if len(b) != sizeofQueryStatistics {
		return nil, fmt.Errorf("statistics reply is %d bytes, want %d", len(b), sizeofQueryStatistics)
	}
	return b[offStatsResult : offStatsResult+sizeofStatisticsResult], nil
}

// AdapterCounts is _ADAPTER_INFORMATION's shape of the adapter.
type AdapterCounts struct {
	Segments int
	Nodes    int
}

func decodeAdapterCounts(b []byte) (AdapterCounts, error) {
	r, err := statsResult(b)
	if err != nil {
		return AdapterCounts{}, err
	}
	s := binary.LittleEndian.Uint32(r[resAdapterNbSegments:])
	n := binary.LittleEndian.Uint32(r[resAdapterNodeCount:])
	if s > maxSegments {
		return AdapterCounts{}, fmt.Errorf("host reports %d memory segments (at most %d exist)", s, maxSegments)
	}
	if n > maxNodes {
		return AdapterCounts{}, fmt.Errorf("host reports %d engine nodes (more than %d is not a real adapter)", n, maxNodes)
	}
	return AdapterCounts{Segments: int(s), Nodes: int(n)}, nil
}

// Segment is one memory segment's _SEGMENT_INFORMATION.
type Segment struct {
	ID int
	// CommitLimit is the segment's size as the video memory manager sees
	// it; Committed and Resident are what is allocated in it and what is
	// in it now, in bytes.
	CommitLimit uint64
	Committed   uint64
	Resident    uint64
	// Aperture marks a segment that maps system memory (non-local).
	Aperture bool
}

// Group is the segment group the segment counts towards.
func (s Segment) Group() SegmentGroup {
	if s.Aperture {
		return SegmentGroupNonLocal
	}
	return SegmentGroupLocal
}

func decodeSegment(b []byte, id int) (Segment, error) {
	r, err := statsResult(b)
	if err != nil {
		return Segment{}, err
	}
	s := Segment{
		ID:          id,
		CommitLimit: binary.LittleEndian.Uint64(r[resSegmentCommitLimit:]),
		Committed:   binary.LittleEndian.Uint64(r[resSegmentCommitted:]),
		Resident:    binary.LittleEndian.Uint64(r[resSegmentResident:]),
		Aperture:    binary.LittleEndian.Uint32(r[resSegmentAperture:]) != 0,
	}
	for _, v := range []uint64{s.CommitLimit, s.Committed, s.Resident} {
		if v > maxPlausibleMemory {
			return Segment{}, fmt.Errorf("segment %d: host reports %d bytes (over 1 PiB)", id, v)
		}
	}
	return s, nil
}

// decodeRunningTime reads a node's (or a process's node) RunningTime, in
// nanoseconds. A negative LARGE_INTEGER is a broken host.
func decodeRunningTime(b []byte, off int) (uint64, error) {
	r, err := statsResult(b)
	if err != nil {
		return 0, err
	}
	v := int64(binary.LittleEndian.Uint64(r[off:]))
	if v < 0 || v > 1<<62/runningTimeUnitNanosec {
		return 0, fmt.Errorf("host reports an engine running time of %d (100 ns units)", v)
	}
	return uint64(v) * runningTimeUnitNanosec, nil
}

// GroupUsage is one process's _PROCESS_SEGMENT_GROUP_INFORMATION.
type GroupUsage struct {
	Budget, Requested, Usage uint64
}

func decodeGroupUsage(b []byte) (GroupUsage, error) {
	r, err := statsResult(b)
	if err != nil {
		return GroupUsage{}, err
	}
	g := GroupUsage{
		Budget:    binary.LittleEndian.Uint64(r[resGroupBudget:]),
		Requested: binary.LittleEndian.Uint64(r[resGroupRequested:]),
		Usage:     binary.LittleEndian.Uint64(r[resGroupUsage:]),
	}
	for _, v := range []uint64{g.Budget, g.Requested, g.Usage} {
		if v > maxPlausibleMemory {
			return GroupUsage{}, fmt.Errorf("host reports a process using %d bytes (over 1 PiB)", v)
		}
	}
	return g, nil
}

// VideoMemoryInfo is the caller's own d3dkmt_queryvideomemoryinfo answer.
type VideoMemoryInfo struct {
	Budget, CurrentUsage, CurrentReservation, AvailableForReservation uint64
}

func encodeQueryVideoMemoryInfo(handle uint32, group SegmentGroup) []byte {
	b := make([]byte, sizeofQueryVideoMemInfo)
	binary.LittleEndian.PutUint64(b[offVidMemProcess:], 0) // the kernel refuses anything but the caller
	binary.LittleEndian.PutUint32(b[offVidMemAdapter:], handle)
	binary.LittleEndian.PutUint32(b[offVidMemGroup:], uint32(group))
	binary.LittleEndian.PutUint32(b[offVidMemPhysicalAdapter:], 0)
	return b
}

func decodeVideoMemoryInfo(b []byte) (VideoMemoryInfo, error) {
	if len(b) != sizeofQueryVideoMemInfo {
		return VideoMemoryInfo{}, fmt.Errorf("video memory info reply is %d bytes, want %d", len(b), sizeofQueryVideoMemInfo)
	}
	v := VideoMemoryInfo{
		Budget:                  binary.LittleEndian.Uint64(b[offVidMemBudget:]),
		CurrentUsage:            binary.LittleEndian.Uint64(b[offVidMemUsage:]),
		CurrentReservation:      binary.LittleEndian.Uint64(b[offVidMemReservation:]),
		AvailableForReservation: binary.LittleEndian.Uint64(b[offVidMemAvailReserve:]),
	}
	if v.Budget > maxPlausibleMemory || v.CurrentUsage > maxPlausibleMemory {
		return VideoMemoryInfo{}, fmt.Errorf("host reports a budget of %d bytes and usage of %d", v.Budget, v.CurrentUsage)
	}
	return v, nil
}

// EngineType is DXGK_ENGINE_TYPE from a node's metadata.
type EngineType uint32

// DXGK_ENGINE_TYPE values (d3dkmddi.h; fastfetch's d3dkmthk.h copies them).
const (
	EngineOther           EngineType = 0
	Engine3D              EngineType = 1
	EngineVideoDecode     EngineType = 2
	EngineVideoEncode     EngineType = 3
	EngineVideoProcessing EngineType = 4
	EngineSceneAssembly   EngineType = 5
	EngineCopy            EngineType = 6
	EngineOverlay         EngineType = 7
	EngineCrypto          EngineType = 8
	EngineVideoCodec      EngineType = 9
)

// Node is one engine's metadata: its type and the driver's name for it
// (Task Manager's engine names: "3D", "Copy", "Compute_0", "Cuda", ...).
type Node struct {
	Ordinal int
	Type    EngineType
	Name    string
}

func newNodeMetadataRequest(ordinal int) []byte {
	b := make([]byte, sizeofNodeMetadata)
	binary.LittleEndian.PutUint32(b[offNodeMetaOrdinal:], uint32(ordinal)) // physical adapter 0 in the high word
	return b
}

func decodeNodeMetadata(b []byte, ordinal int) (Node, error) {
	if len(b) != sizeofNodeMetadata {
		return Node{}, fmt.Errorf("node metadata reply is %d bytes, want %d", len(b), sizeofNodeMetadata)
	}
	return Node{
		Ordinal: ordinal,
		Type:    EngineType(binary.LittleEndian.Uint32(b[offNodeMetaEngineType:])),
		Name:    decodeUTF16(b[offNodeMetaName : offNodeMetaName+2*nodeMetadataNameUnits]),
	}, nil
}
