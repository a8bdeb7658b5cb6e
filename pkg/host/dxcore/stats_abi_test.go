package dxcore

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"unsafe"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/simhost"
	"golang.org/x/sys/unix"
)

// Go mirrors of the C structures, field for field, so unsafe.Offsetof
// computes what gcc does on x86_64 (natural alignment). Sources:
// WSL2-Linux-Kernel include/uapi/misc/d3dkmthk.h (struct
// d3dkmt_querystatistics, struct d3dkmt_queryvideomemoryinfo) and the
// Windows SDK d3dkmthk.h (the result structures, the query union).
type cQueryStatistics struct {
	Type    uint32
	LUIDLow uint32
	LUIDHi  int32
	_       uint32 // padding before the u64
	Process uint64
	Result  [0x308]byte
	Query   uint32 // D3DKMT_QUERYSTATISTICS_QUERY_SEGMENT/NODE, segment group
	_       uint32 // tail padding to 8
}

type cQueryVideoMemoryInfo struct {
	Process                 uint64
	Adapter                 uint32
	MemorySegmentGroup      uint32
	Budget                  uint64
	CurrentUsage            uint64
	CurrentReservation      uint64
	AvailableForReservation uint64
	PhysicalAdapterIndex    uint32
}

type cSegmentInformation struct {
	CommitLimit       uint64
	BytesCommitted    uint64
	BytesResident     uint64
	TotalBytesEvicted uint64 // D3DKMT_QUERYSTATISTICS_MEMORY
	AllocsCommitted   uint32
	AllocsResident    uint32
	Aperture          uint32
	EvictedByPriority [5]uint64 // D3DKMT_MaxAllocationPriorityClass
}

type cAdapterInformation struct {
	NbSegments uint32
	NodeCount  uint32
}

type cProcessSegmentGroupInformation struct {
	Budget, Requested, Usage uint64
	Demoted                  [5]uint64
}

type cNodeInformation struct {
	RunningTime   int64 // GlobalInformation.RunningTime (LARGE_INTEGER)
	ContextSwitch uint32
}

func TestStatsIoctlNumbers(t *testing.T) {
	tests := []struct {
		name            string
		got, nr, size   uint32
		literal, cSized uint32
	}{
		// 0x328 = sizeof(struct d3dkmt_querystatistics) (its union's
		// char size[0x328]); fastfetch static_asserts the same size.
		{"LX_DXQUERYSTATISTICS", LX_DXQUERYSTATISTICS, 0x43, 0x328, 0xC3284743, uint32(unsafe.Sizeof(cQueryStatistics{}))},
		{"LX_DXQUERYVIDEOMEMORYINFO", LX_DXQUERYVIDEOMEMORYINFO, 0x0a, 56, 0xC038470A, uint32(unsafe.Sizeof(cQueryVideoMemoryInfo{}))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.literal {
				t.Errorf("constant = %#x, want %#x", tt.got, tt.literal)
			}
			if k := kernelIOWR('G', tt.nr, tt.size); k != tt.literal {
				t.Errorf("_IOWR('G', %#x, %d) = %#x", tt.nr, tt.size, k)
			}
			if tt.cSized != tt.size {
				t.Errorf("mirror struct is %d bytes, the header says %d", tt.cSized, tt.size)
			}
		})
	}
}

func TestStatsOffsets(t *testing.T) {
	var q cQueryStatistics
	var v cQueryVideoMemoryInfo
	var s cSegmentInformation
	var a cAdapterInformation
	var g cProcessSegmentGroupInformation
	var n cNodeInformation
	tests := []struct {
		name      string
		got, want uintptr
	}{
		{"querystatistics.type", offStatsType, unsafe.Offsetof(q.Type)},
		{"querystatistics.adapter_luid", offStatsLUID, unsafe.Offsetof(q.LUIDLow)},
		{"querystatistics.process", offStatsProcess, unsafe.Offsetof(q.Process)},
		{"querystatistics.result", offStatsResult, unsafe.Offsetof(q.Result)},
		{"querystatistics.query (0x320)", offStatsQuery, unsafe.Offsetof(q.Query)},
		{"queryvideomemoryinfo.adapter", offVidMemAdapter, unsafe.Offsetof(v.Adapter)},
		{"queryvideomemoryinfo.memory_segment_group", offVidMemGroup, unsafe.Offsetof(v.MemorySegmentGroup)},
		{"queryvideomemoryinfo.budget", offVidMemBudget, unsafe.Offsetof(v.Budget)},
		{"queryvideomemoryinfo.current_usage", offVidMemUsage, unsafe.Offsetof(v.CurrentUsage)},
		{"queryvideomemoryinfo.current_reservation", offVidMemReservation, unsafe.Offsetof(v.CurrentReservation)},
		{"queryvideomemoryinfo.available_for_reservation", offVidMemAvailReserve, unsafe.Offsetof(v.AvailableForReservation)},
		{"queryvideomemoryinfo.physical_adapter_index", offVidMemPhysicalAdapter, unsafe.Offsetof(v.PhysicalAdapterIndex)},
		{"segment.CommitLimit", resSegmentCommitLimit, unsafe.Offsetof(s.CommitLimit)},
		{"segment.BytesCommitted", resSegmentCommitted, unsafe.Offsetof(s.BytesCommitted)},
		{"segment.BytesResident", resSegmentResident, unsafe.Offsetof(s.BytesResident)},
		{"segment.Aperture", resSegmentAperture, unsafe.Offsetof(s.Aperture)},
		{"adapter.NbSegments", resAdapterNbSegments, unsafe.Offsetof(a.NbSegments)},
		{"adapter.NodeCount", resAdapterNodeCount, unsafe.Offsetof(a.NodeCount)},
		{"processsegmentgroup.Budget", resGroupBudget, unsafe.Offsetof(g.Budget)},
		{"processsegmentgroup.Requested", resGroupRequested, unsafe.Offsetof(g.Requested)},
		{"processsegmentgroup.Usage", resGroupUsage, unsafe.Offsetof(g.Usage)},
		{"node.RunningTime", resNodeRunningTime, unsafe.Offsetof(n.RunningTime)},
		{"node.ContextSwitch", resNodeContextSwitch, unsafe.Offsetof(n.ContextSwitch)},
		// D3DKMT_NODEMETADATA is packed: u32 ordinal, u32 engine type,
		// WCHAR[32] name, u32 flags, two BOOLEANs = 0x4e bytes.
		{"nodemetadata.EngineType", offNodeMetaEngineType, 4},
		{"nodemetadata.FriendlyName", offNodeMetaName, 8},
		{"nodemetadata.Flags", offNodeMetaFlags, 8 + 64},
		{"nodemetadata.GpuMmuSupported", offNodeMetaGpuMmu, 76},
		{"nodemetadata size", sizeofNodeMetadata, offNodeMetaIoMmu + 1},
		{"result fits every structure", sizeofStatisticsResult, 0x308},
		{"segment information fits the result", uintptr(unsafe.Sizeof(s)), uintptr(unsafe.Sizeof(s))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("offset = %d, want %d", tt.got, tt.want)
			}
		})
	}
}

// statsReply builds a reply with fields written at the header's offsets
// (via the mirror struct's), independently of the package's encoder.
func statsReply(fill func(r []byte)) []byte {
	b := make([]byte, unsafe.Sizeof(cQueryStatistics{}))
	var q cQueryStatistics
	fill(b[unsafe.Offsetof(q.Result):])
	return b
}

func TestDecodeStatistics(t *testing.T) {
	var s cSegmentInformation
	seg := statsReply(func(r []byte) {
		binary.LittleEndian.PutUint64(r[unsafe.Offsetof(s.CommitLimit):], 6<<30)
		binary.LittleEndian.PutUint64(r[unsafe.Offsetof(s.BytesCommitted):], 3<<30)
		binary.LittleEndian.PutUint64(r[unsafe.Offsetof(s.BytesResident):], 2<<30)
		binary.LittleEndian.PutUint32(r[unsafe.Offsetof(s.Aperture):], 1)
	})
	got, err := decodeSegment(seg, 1)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Segment{ID: 1, CommitLimit: 6 << 30, Committed: 3 << 30, Resident: 2 << 30, Aperture: true}); got != want {
		t.Errorf("segment = %+v, want %+v", got, want)
	}
	if got.Group() != SegmentGroupNonLocal {
		t.Errorf("aperture segment counts towards %v", got.Group())
	}
	node := statsReply(func(r []byte) { binary.LittleEndian.PutUint64(r[0:], 12345) })
	if ns, err := decodeRunningTime(node, resNodeRunningTime); err != nil || ns != 1234500 {
		t.Errorf("running time = %d, %v; want 1234500 ns", ns, err)
	}
	var g cProcessSegmentGroupInformation
	grp := statsReply(func(r []byte) {
		binary.LittleEndian.PutUint64(r[unsafe.Offsetof(g.Budget):], 5<<30)
		binary.LittleEndian.PutUint64(r[unsafe.Offsetof(g.Usage):], 1<<30)
	})
	if u, err := decodeGroupUsage(grp); err != nil || u.Usage != 1<<30 || u.Budget != 5<<30 {
		t.Errorf("group usage = %+v, %v", u, err)
	}
}

func TestDecodeStatisticsRejectsBrokenHosts(t *testing.T) {
	tests := []struct {
		name string
		run  func() error
		want string
	}{
		{"short reply", func() error { _, err := decodeSegment(make([]byte, 100), 0); return err }, "statistics reply is 100 bytes, want 808"},
		{"absurd segment", func() error {
			_, err := decodeSegment(statsReply(func(r []byte) { binary.LittleEndian.PutUint64(r[8:], 1<<60) }), 2)
			return err
		}, "segment 2: host reports 1152921504606846976 bytes (over 1 PiB)"},
		{"negative running time", func() error {
			_, err := decodeRunningTime(statsReply(func(r []byte) { binary.LittleEndian.PutUint64(r[0:], 1<<63) }), 0)
			return err
		}, "host reports an engine running time of -9223372036854775808 (100 ns units)"},
		{"too many segments", func() error {
			_, err := decodeAdapterCounts(statsReply(func(r []byte) { binary.LittleEndian.PutUint32(r[0:], 33) }))
			return err
		}, "host reports 33 memory segments (at most 32 exist)"},
		{"short node metadata", func() error { _, err := decodeNodeMetadata(make([]byte, 77), 0); return err }, "node metadata reply is 77 bytes, want 78"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.run()
			if err == nil || err.Error() != tt.want {
				t.Errorf("error = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestEncodeQueryStatistics(t *testing.T) {
	b := encodeQueryStatistics(statsProcessSegmentGroup, LUID{Low: 0x4486d1, High: -1}, 4242, uint32(SegmentGroupNonLocal))
	for _, f := range []struct {
		name      string
		off, size int
		want      uint64
	}{
		{"type", 0, 4, 9}, {"luid low", 4, 4, 0x4486d1}, {"luid high", 8, 4, 0xffffffff},
		{"process", 16, 8, 4242}, {"query (segment group)", 0x320, 4, 1},
	} {
		if got := field(b, f.off, f.size); got != f.want {
			t.Errorf("%s = %#x, want %#x", f.name, got, f.want)
		}
	}
	v := encodeQueryVideoMemoryInfo(0x40000040, SegmentGroupLocal)
	if field(v, 0, 8) != 0 || field(v, 8, 4) != 0x40000040 || field(v, 12, 4) != 0 {
		t.Errorf("video memory info request = %x", v[:16])
	}
}

// fakeStats plays a kernel and host for Session tests.
type fakeStats struct {
	*fakeKernel
	statsErr error
	vidErr   error
	lastPID  uint64
}

func (f *fakeStats) queryStatistics(arg []byte) error {
	f.lastPID = binary.LittleEndian.Uint64(arg[offStatsProcess:])
	if f.statsErr != nil {
		return f.statsErr
	}
	r := arg[offStatsResult:]
	switch binary.LittleEndian.Uint32(arg) {
	case statsAdapter:
		binary.LittleEndian.PutUint32(r[0:], 2)
		binary.LittleEndian.PutUint32(r[4:], 3)
	case statsProcessSegmentGroup:
		binary.LittleEndian.PutUint64(r[resGroupUsage:], 7<<20)
	}
	return nil
}

func (f *fakeStats) queryVideoMemoryInfo(arg []byte) error {
	if f.vidErr != nil {
		return f.vidErr
	}
	binary.LittleEndian.PutUint64(arg[offVidMemBudget:], 5<<30)
	return nil
}

func TestSessionErrors(t *testing.T) {
	tests := []struct {
		name    string
		err     error
		pid     int
		target  error
		message string
	}{
		{"old kernel", unix.ENOTTY, 0, ErrStatsUnsupported, "LX_DXQUERYSTATISTICS: inappropriate ioctl for device: " + ErrStatsUnsupported.Error()},
		{"unknown pid", unix.EINVAL, 77, ErrProcessNotFound, "LX_DXQUERYSTATISTICS for pid 77: invalid argument: " + ErrProcessNotFound.Error()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeStats{fakeKernel: laptopKernel(t), statsErr: tt.err}
			s, err := newSession(f, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			_, err = s.ProcessGroupUsage(s.Adapters()[0].LUID, tt.pid, SegmentGroupLocal)
			if !errors.Is(err, tt.target) || err.Error() != tt.message {
				t.Errorf("error = %v, want %q", err, tt.message)
			}
			if f.lastPID != uint64(tt.pid) {
				t.Errorf("process field = %d, want %d", f.lastPID, tt.pid)
			}
		})
	}
}

func TestSessionClosesHandles(t *testing.T) {
	f := &fakeStats{fakeKernel: laptopKernel(t)}
	s, err := newSession(f, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Adapters()) != 2 {
		t.Fatalf("adapters = %d, want 2", len(s.Adapters()))
	}
	c, err := s.Counts(s.Adapters()[1].LUID)
	if err != nil || c != (AdapterCounts{Segments: 2, Nodes: 3}) {
		t.Errorf("counts = %+v, %v", c, err)
	}
	v, err := s.VideoMemory(s.Adapters()[1].LUID, SegmentGroupLocal)
	if err != nil || v.Budget != 5<<30 {
		t.Errorf("video memory = %+v, %v", v, err)
	}
	if open := len(f.open); open != 2 {
		t.Errorf("%d handles open during the session, want 2", open)
	}
	s.Close()
	if open := len(f.open); open != 0 {
		t.Errorf("%d handles left open after Close", open)
	}
	if _, err := s.VideoMemory(LUID{Low: 1}, SegmentGroupLocal); err == nil || !strings.Contains(err.Error(), "not open") {
		t.Errorf("query after Close = %v", err)
	}
}

func FuzzDecodeStatistics(f *testing.F) {
	f.Add(statsReply(func(r []byte) { binary.LittleEndian.PutUint64(r[0:], 6<<30) }), 0)
	f.Add(make([]byte, 808), 1)
	f.Add(make([]byte, 3), 2)
	f.Add(make([]byte, 78), 3)
	f.Fuzz(func(t *testing.T, reply []byte, which int) {
		switch which & 7 {
		case 0:
			if s, err := decodeSegment(reply, 0); err == nil && (s.Resident > maxPlausibleMemory || len(reply) != 808) {
				t.Errorf("accepted %+v from %d bytes", s, len(reply))
			}
		case 1:
			if c, err := decodeAdapterCounts(reply); err == nil && (c.Segments > maxSegments || c.Nodes > maxNodes) {
				t.Errorf("accepted %+v", c)
			}
		case 2:
			if _, err := decodeRunningTime(reply, 0); err == nil && len(reply) != 808 {
				t.Errorf("accepted a %d-byte reply", len(reply))
			}
		case 3:
			_, _ = decodeNodeMetadata(reply, 0)
		case 4:
			if g, err := decodeGroupUsage(reply); err == nil && g.Usage > maxPlausibleMemory {
				t.Errorf("accepted %+v", g)
			}
		default:
			_, _ = decodeVideoMemoryInfo(reply)
		}
	})
}

func laptopKernel(t *testing.T) *fakeKernel {
	p, err := simhost.Lookup("nvidia-laptop")
	if err != nil {
		t.Fatal(err)
	}
	var as []fakeAdapter
	for _, a := range p.Adapters {
		as = append(as, profileAdapter(a, nil))
	}
	return newFakeKernel(t, as...)
}
