package dxcore

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// Errors of the statistics calls, for errors.Is.
var (
	// ErrStatsUnsupported: the kernel does not know LX_DXQUERYSTATISTICS
	// (ENOTTY): WSL kernels before the statistics patch.
	ErrStatsUnsupported = errors.New("the WSL kernel has no GPU statistics call: update WSL (wsl --update)")
	// ErrProcessNotFound: the kernel could not resolve the pid to a host
	// process (EINVAL): the process holds no /dev/dxg, runs in another pid
	// namespace, or the kernel predates the pid lookup and passed the
	// number to the host as a handle.
	ErrProcessNotFound = errors.New("the WSL kernel cannot attribute GPU use to this process (no /dev/dxg open, other pid namespace, or a kernel without pid lookup)")
)

// statsIoctls adds the statistics calls to the enumeration surface.
type statsIoctls interface {
	adapterIoctls
	queryStatistics(arg []byte) error
	queryVideoMemoryInfo(arg []byte) error
}

// StatsAdapter is an adapter a Session watches.
type StatsAdapter struct {
	Adapter
	// DriverVersion is the user-mode driver's file version
	// (KMTQAITYPE_UMD_DRIVER_VERSION) as Windows prints it, "" if unknown.
	DriverVersion string
}

// Session keeps /dev/dxg open and one handle per adapter for a long-lived
// reader (top, the metrics endpoint, the device plugin's health loop): the
// statistics ioctl names adapters by LUID, but node metadata, the driver
// version and the caller's video memory budget need a handle. Close
// releases both. A Session is not safe for concurrent use.
type Session struct {
	d        statsIoctls
	close    func() error
	adapters []StatsAdapter
	handles  map[LUID]uint32
}

// Adapters returns the adapters found when the session opened.
func (s *Session) Adapters() []StatsAdapter { return s.adapters }

// newSession enumerates with every detail and keeps the handles open.
func newSession(d statsIoctls, closeFn func() error) (*Session, error) {
	infos, _, err := listAdapters(d)
	s := &Session{d: d, close: closeFn, handles: map[LUID]uint32{}}
	if err != nil {
		closeAll(d, infos)
		return nil, err
	}
	for i, info := range infos {
		a, err := queryAdapter(d, info.handle, Options{Details: true})
		if err != nil {
			_ = d.closeAdapter(info.handle)
			continue
		}
		a.Index, a.LUID = i, info.luid
		sa := StatsAdapter{Adapter: a}
		v := make([]byte, sizeofUMDDriverVersion)
		if d.queryAdapterInfo(info.handle, qaiUMDDriverVersion, v) == nil {
			sa.DriverVersion = DriverVersion(le64(v)).String()
		}
		s.adapters = append(s.adapters, sa)
		s.handles[info.luid] = info.handle
	}
	return s, nil
}

// Close closes every adapter handle and the device.
func (s *Session) Close() error {
	for _, h := range s.handles {
		_ = s.d.closeAdapter(h)
	}
	s.handles = nil
	if s.close != nil {
		return s.close()
	}
	return nil
}

func (s *Session) stats(typ uint32, luid LUID, pid uint64, query uint32) ([]byte, error) {
	arg := encodeQueryStatistics(typ, luid, pid, query)
	if err := s.d.queryStatistics(arg); err != nil {
		if errors.Is(err, unix.ENOTTY) {
			return nil, fmt.Errorf("LX_DXQUERYSTATISTICS: %w: %w", err, ErrStatsUnsupported)
		}
		if pid != 0 && errors.Is(err, unix.EINVAL) {
			return nil, fmt.Errorf("LX_DXQUERYSTATISTICS for pid %d: %w: %w", pid, err, ErrProcessNotFound)
		}
		return nil, fmt.Errorf("LX_DXQUERYSTATISTICS: %w", err)
	}
	return arg, nil
}

// Counts asks how many memory segments and engine nodes the adapter has
// (D3DKMT_QUERYSTATISTICS_ADAPTER).
func (s *Session) Counts(luid LUID) (AdapterCounts, error) {
	b, err := s.stats(statsAdapter, luid, 0, 0)
	if err != nil {
		return AdapterCounts{}, err
	}
	return decodeAdapterCounts(b)
}

// Segment asks for one memory segment's size and use
// (D3DKMT_QUERYSTATISTICS_SEGMENT).
func (s *Session) Segment(luid LUID, id int) (Segment, error) {
	b, err := s.stats(statsSegment, luid, 0, uint32(id))
	if err != nil {
		return Segment{}, err
	}
	return decodeSegment(b, id)
}

// RunningTime asks for the total time an engine node has been busy since
// the adapter started, in nanoseconds (D3DKMT_QUERYSTATISTICS_NODE,
// GlobalInformation.RunningTime). Busy ratio is its growth over wall time.
func (s *Session) RunningTime(luid LUID, node int) (uint64, error) {
	b, err := s.stats(statsNode, luid, 0, uint32(node))
	if err != nil {
		return 0, err
	}
	return decodeRunningTime(b, resNodeRunningTime)
}

// ProcessGroupUsage asks what process pid (its pid as the kernel recorded
// it when the process opened /dev/dxg: the pid in the process's own pid
// namespace) uses of a segment group on the adapter
// (D3DKMT_QUERYSTATISTICS_PROCESS_SEGMENT_GROUP). pid 0 is the caller.
// Errors match ErrProcessNotFound when the kernel cannot resolve pid.
func (s *Session) ProcessGroupUsage(luid LUID, pid int, group SegmentGroup) (GroupUsage, error) {
	b, err := s.stats(statsProcessSegmentGroup, luid, uint64(pid), uint32(group))
	if err != nil {
		return GroupUsage{}, err
	}
	return decodeGroupUsage(b)
}

func (s *Session) handle(luid LUID) (uint32, error) {
	h, ok := s.handles[luid]
	if !ok {
		return 0, fmt.Errorf("adapter %s is not open in this session", luid)
	}
	return h, nil
}

// Node asks for an engine node's type and name (KMTQAITYPE_NODEMETADATA).
func (s *Session) Node(luid LUID, ordinal int) (Node, error) {
	h, err := s.handle(luid)
	if err != nil {
		return Node{}, err
	}
	b := newNodeMetadataRequest(ordinal)
	if err := s.d.queryAdapterInfo(h, qaiNodeMetadata, b); err != nil {
		return Node{}, fmt.Errorf("query NODEMETADATA %d: %w", ordinal, err)
	}
	return decodeNodeMetadata(b, ordinal)
}

// VideoMemory asks for this process's own budget and usage of a segment
// group (LX_DXQUERYVIDEOMEMORYINFO). The budget is what the OS would let
// this process keep resident: on a discrete GPU, the local budget is the
// share of VRAM an application may count on.
func (s *Session) VideoMemory(luid LUID, group SegmentGroup) (VideoMemoryInfo, error) {
	h, err := s.handle(luid)
	if err != nil {
		return VideoMemoryInfo{}, err
	}
	arg := encodeQueryVideoMemoryInfo(h, group)
	if err := s.d.queryVideoMemoryInfo(arg); err != nil {
		return VideoMemoryInfo{}, fmt.Errorf("LX_DXQUERYVIDEOMEMORYINFO: %w", err)
	}
	return decodeVideoMemoryInfo(arg)
}

func le64(b []byte) uint64 {
	var v uint64
	for i := 7; i >= 0; i-- {
		v = v<<8 | uint64(b[i])
	}
	return v
}
