package gpustats

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/dxcore"
)

// fakeSession is one open of the device: its adapters, and whether their
// statistics fail (an adapter removed, a driver restarted under it).
type fakeSession struct {
	luids []dxcore.LUID
	// adapters, when set, are the adapters (their LUIDs replaced by luids).
	adapters []dxcore.Adapter
	fail     error
	closed   bool
	// running is every node's running time (ns); nil is always 0.
	running func() uint64
}

func (f *fakeSession) Adapters() []dxcore.StatsAdapter {
	var out []dxcore.StatsAdapter
	for i, l := range f.luids {
		a := dxcore.Adapter{Index: i}
		if i < len(f.adapters) {
			a = f.adapters[i]
		}
		a.LUID = l
		out = append(out, dxcore.StatsAdapter{Adapter: a})
	}
	return out
}

func (f *fakeSession) Counts(dxcore.LUID) (dxcore.AdapterCounts, error) {
	if f.closed {
		return dxcore.AdapterCounts{}, errors.New("read after Close")
	}
	return dxcore.AdapterCounts{Nodes: 1}, f.fail
}
func (f *fakeSession) Segment(dxcore.LUID, int) (dxcore.Segment, error) { return dxcore.Segment{}, nil }
func (f *fakeSession) VideoMemory(dxcore.LUID, dxcore.SegmentGroup) (dxcore.VideoMemoryInfo, error) {
	return dxcore.VideoMemoryInfo{}, nil
}
func (f *fakeSession) Node(_ dxcore.LUID, i int) (dxcore.Node, error) {
	return dxcore.Node{Ordinal: i, Type: dxcore.Engine3D, Name: "3D"}, nil
}
func (f *fakeSession) RunningTime(dxcore.LUID, int) (uint64, error) {
	if f.running == nil {
		return 0, nil
	}
	return f.running(), nil
}
func (f *fakeSession) ProcessGroupUsage(dxcore.LUID, int, dxcore.SegmentGroup) (dxcore.GroupUsage, error) {
	return dxcore.GroupUsage{}, nil
}
func (f *fakeSession) Close() error { f.closed = true; return nil }

// fakeHost is the host as the sampler finds it: the LUIDs the kernel
// lists now, and what the next open gives.
type fakeHost struct {
	luids    []dxcore.LUID
	adapters []dxcore.Adapter
	fail     error // statistics of sessions opened from now on
	openErr  error
	opened   []*fakeSession
	now      time.Time
	running  func() uint64 // the sessions' running times
}

func (h *fakeHost) open(string) (session, error) {
	if h.openErr != nil {
		return nil, h.openErr
	}
	s := &fakeSession{luids: slices.Clone(h.luids), adapters: h.adapters, fail: h.fail, running: h.running}
	h.opened = append(h.opened, s)
	return s, nil
}

func (h *fakeHost) list(string) ([]dxcore.LUID, error) { return slices.Clone(h.luids), nil }

func luidsOf(s Sample) []string {
	var out []string
	for _, a := range s.Adapters {
		out = append(out, a.LUID)
	}
	return out
}

// TestSamplerFollowsTheHost: a long-lived sampler (the metrics endpoint,
// the device plugin) sees a driver update or an adapter change and a
// recovered adapter, instead of reading the adapters it opened at start
// until it restarts.
func TestSamplerFollowsTheHost(t *testing.T) {
	a, b, c := dxcore.LUID{Low: 0xa}, dxcore.LUID{Low: 0xb}, dxcore.LUID{Low: 0xc}
	h := &fakeHost{luids: []dxcore.LUID{a}, now: time.Unix(1000, 0)}
	p, err := open(Options{NoProcesses: true}, h.open, h.list, func() time.Time { return h.now })
	if err != nil {
		t.Fatal(err)
	}
	sample := func() Sample { h.now = h.now.Add(time.Second); return p.Sample() }

	if got := luidsOf(sample()); !slices.Equal(got, []string{a.String()}) || len(h.opened) != 1 {
		t.Fatalf("at start: %v, %d opens", got, len(h.opened))
	}
	// A driver update: the adapter restarts with a new LUID.
	h.luids = []dxcore.LUID{b}
	if got := luidsOf(sample()); !slices.Equal(got, []string{b.String()}) {
		t.Fatalf("after a driver update: %v, want the new LUID %s", got, b)
	}
	if len(h.opened) != 2 || !h.opened[0].closed {
		t.Fatalf("%d opens, old session closed %v", len(h.opened), h.opened[0].closed)
	}
	// An adapter added.
	h.luids = []dxcore.LUID{b, c}
	if got := luidsOf(sample()); len(got) != 2 {
		t.Fatalf("after an adapter was added: %v", got)
	}
	// Nothing changed: no reopen, and busy ratios keep their baseline.
	if sample(); len(h.opened) != 3 {
		t.Fatalf("reopened with nothing changed: %d opens", len(h.opened))
	}

	// The host cannot be opened right now: the old session stays, and
	// the next sample tries again.
	h.luids, h.openErr = []dxcore.LUID{c}, errors.New("no such device")
	if got := luidsOf(sample()); len(got) != 2 || h.opened[2].closed {
		t.Fatalf("with the reopen failing: %v, closed %v", got, h.opened[2].closed)
	}
	h.openErr = nil
	if got := luidsOf(sample()); !slices.Equal(got, []string{c.String()}) {
		t.Fatalf("once it opens again: %v", got)
	}
}

// TestSamplerReopensAfterFailures: statistics that fail with the same
// LUIDs listed (the adapter's handle went stale under a driver restart)
// reopen the session, but at most once per reopenAfterError, so an
// adapter that stays broken costs no enumeration per scrape.
func TestSamplerReopensAfterFailures(t *testing.T) {
	a := dxcore.LUID{Low: 0xa}
	h := &fakeHost{luids: []dxcore.LUID{a}, fail: errors.New("LX_DXQUERYSTATISTICS: no such device"), now: time.Unix(1000, 0)}
	p, err := open(Options{NoProcesses: true}, h.open, h.list, func() time.Time { return h.now })
	if err != nil {
		t.Fatal(err)
	}
	s := p.Sample()
	if len(s.Adapters) != 1 || !strings.Contains(s.Adapters[0].Error, "no such device") {
		t.Fatalf("failing adapter: %+v", s.Adapters)
	}
	h.now = h.now.Add(reopenAfterError / 2)
	p.Sample()
	if len(h.opened) != 1 {
		t.Fatalf("reopened %d times within %s", len(h.opened)-1, reopenAfterError)
	}
	h.fail = nil // the adapter is back
	h.now = h.now.Add(reopenAfterError)
	s = p.Sample()
	if len(h.opened) != 2 || !h.opened[0].closed || s.Adapters[0].Error != "" {
		t.Fatalf("after %s: %d opens, adapter %+v", reopenAfterError, len(h.opened), s.Adapters[0])
	}
}

// TestSampleIdentity: an adapter's series are named by its identity
// (package adapterid), which a WSL reboot, new LUIDs for the same
// adapters, does not change; the vendor is the identity's.
func TestSampleIdentity(t *testing.T) {
	adapters := []dxcore.Adapter{
		{PCI: dxcore.PCIIDs{Vendor: 0x8086, Device: 0x9a49, SubSystem: 0x22d8, SubVendor: 0x17aa}},
		{PCI: dxcore.PCIIDs{Vendor: 0x10de, Device: 0x2520, SubSystem: 0x3a5c, SubVendor: 0x17aa}},
		{PCI: dxcore.PCIIDs{Vendor: 0x1ed5, Device: 0x0001}, Type: dxcore.TypeComputeOnly},
	}
	h := &fakeHost{luids: []dxcore.LUID{{Low: 1}, {Low: 2}, {Low: 3}}, adapters: adapters, now: time.Unix(1000, 0)}
	p, err := open(Options{NoProcesses: true}, h.open, h.list, func() time.Time { return h.now })
	if err != nil {
		t.Fatal(err)
	}
	ids := func() []string {
		h.now = h.now.Add(time.Second)
		var out []string
		for _, a := range p.Sample().Adapters {
			out = append(out, a.ID+" "+a.Kind+" "+a.Vendor)
		}
		return out
	}
	want := []string{"intel-9a49-22d817aa-0 gpu intel", "nvidia-2520-3a5c17aa-0 gpu nvidia", "unknown-0001-00000000-0 npu unknown"}
	if got := ids(); !slices.Equal(got, want) {
		t.Fatalf("identities %q, want %q", got, want)
	}
	h.luids = []dxcore.LUID{{Low: 11}, {Low: 12}, {Low: 13}} // a WSL reboot
	if got := ids(); !slices.Equal(got, want) {
		t.Errorf("after a reboot: %q, want %q", got, want)
	}
}
