package gpustats

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/driverstore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/dxcore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/adapterid"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/usage/containernames"
)

// Engine is one engine node in a sample.
type Engine struct {
	Node int    `json:"node"`
	Name string `json:"name"`
	Kind string `json:"kind"`
	// RunningSeconds is the node's total busy time since the adapter
	// started (a counter).
	RunningSeconds float64 `json:"runningSeconds"`
	// Busy is the busy ratio (0..1) since the previous sample; nil on the
	// first sample or after a counter reset.
	Busy  *float64 `json:"busy,omitempty"`
	Error string   `json:"error,omitempty"`
}

// Memory is one segment group of an adapter.
type Memory struct {
	Total uint64 `json:"totalBytes"`
	Used  uint64 `json:"usedBytes"`
}

// ProcessUse is one process's memory on one adapter.
type ProcessUse struct {
	Process
	Local    uint64 `json:"localBytes"`
	NonLocal uint64 `json:"nonLocalBytes"`
}

// Adapter is one adapter in a sample.
type Adapter struct {
	// ID is the adapter's identity (package adapterid): what its series
	// and the device plugin's and DRA driver's devices are named by,
	// unchanged by a WSL boot or a driver update. Index and LUID are the
	// host's names for it now.
	ID            string `json:"id"`
	Kind          string `json:"kind"`
	Index         int    `json:"index"`
	LUID          string `json:"luid"`
	Vendor        string `json:"vendor"`
	Description   string `json:"description,omitempty"`
	DriverVersion string `json:"driverVersion,omitempty"`
	// Local is the adapter's own memory (VRAM), NonLocal the system memory
	// it maps; an integrated GPU has only NonLocal.
	Local    Memory `json:"local"`
	NonLocal Memory `json:"nonLocal"`
	// Budget is the budget the OS gives this process in the adapter's
	// main group (local if it has local memory): what an application can
	// count on keeping resident.
	Budget    uint64       `json:"budgetBytes,omitempty"`
	Engines   []Engine     `json:"engines"`
	Processes []ProcessUse `json:"processes"`
	// Error is set when the adapter's queries failed: it is unhealthy.
	Error string `json:"error,omitempty"`
	// Unattributed are dxg processes whose use of the adapter cannot be
	// read, each with why.
	Unattributed []Unattributed `json:"unattributed,omitempty"`
	// Notes say what else could not be read (the /proc scan, a reopened
	// session).
	Notes []string `json:"notes,omitempty"`
}

// Unattributed is a dxg process whose use of an adapter cannot be read.
type Unattributed struct {
	PID  int    `json:"pid"`
	Comm string `json:"comm"`
	// Reason is one of the Reason constants, Error the call's error for
	// ReasonError.
	Reason string `json:"reason"`
	Error  string `json:"error,omitempty"`
}

// Why a process is unattributed.
const (
	// ReasonAmbiguous: another dxg process has the same pid in its own
	// namespace (every container's pid 1), which is all the host knows.
	ReasonAmbiguous = "ambiguous-pid"
	// ReasonNotFound: the host does not know the pid: a process in a pid
	// namespace the kernel's lookup cannot resolve, or one that exited.
	ReasonNotFound = "not-found"
	// ReasonError: the statistics call failed otherwise.
	ReasonError = "error"
)

// Sample is every adapter at one moment.
type Sample struct {
	Time     time.Time `json:"time"`
	Adapters []Adapter `json:"adapters"`
	// Ioctls is how many dxg calls the sample took.
	Ioctls int `json:"ioctls"`
	// Seconds is how long the sample's queries took.
	Seconds float64 `json:"seconds"`
}

// Options say where to look.
type Options struct {
	// Device is the dxg node (config dxg_device).
	Device string
	// DriversDir is where the driver store folders are (config
	// drivers_dir); "" means driverstore.DefaultDriversDir. An adapter
	// whose PCI vendor is unknown is classified by its folder there, as
	// the device plugin and info classify it.
	DriversDir string
	// ProcRoot is /proc (tests point it elsewhere); "" means /proc.
	ProcRoot string
	// NoProcesses skips the per-process figures (health checks).
	NoProcesses bool
	// ProcessRescan is how often the /proc scan for dxg processes runs; in
	// between, the processes found last are asked again (one that exited
	// answers EINVAL and is dropped from the figures). The scan reads
	// every fd link of every process and costs far more than the ioctls
	// on a busy host (BenchmarkDxgProcesses); 0 scans on every sample.
	ProcessRescan time.Duration
	// Names name the processes' containers (package containernames),
	// read at every /proc scan; none leaves the ids.
	Names []containernames.Source
}

// Sampler takes samples; it is safe for concurrent use (one at a time).
//
// It keeps one session open, and opens a new one when that one no longer
// describes the host: before a sample when the adapters the kernel lists
// (their LUIDs, a guest-side call) differ from the session's (a driver
// update, an adapter added, removed or restarted gets a new LUID), and
// when an adapter's statistics failed in the last sample, at most once per
// reopenAfterError. A session that cannot be opened leaves the old one in
// place until the next sample tries again.
type Sampler struct {
	mu    sync.Mutex
	opt   Options
	s     session
	nodes map[dxcore.LUID][]dxcore.Node
	// prev is each node's last running time and when it was read: the
	// busy ratio divides by the time between the two reads of that node,
	// not of the sample, so the calls before it do not skew it.
	prev    map[string]reading
	counter countingSession
	now     func() time.Time

	// scan runs the /proc scan (scanProcs, DxgProcesses or a test's)
	// outside mu; a sample waits for it at most scanWait.
	scan      procScan
	scanProcs func() ([]Process, error)
	scanWait  time.Duration

	// open opens a session and list lists the LUIDs the kernel has;
	// dxcore's, or a fake in tests.
	open func(device string) (session, error)
	list func(device string) ([]dxcore.LUID, error)
	// failed is set when an adapter's statistics failed; opened is when
	// the session was opened.
	failed bool
	opened time.Time
	// ids are the session's adapters' identities, in its order.
	ids []adapterid.ID
}

// scanWait is how long a sample waits for a /proc scan under way: a scan
// takes milliseconds (BenchmarkDxgProcesses), and one that takes longer
// is stuck on something the scan did not foresee; the sample goes on with
// the previous scan's processes rather than stall every scrape with it.
const scanWait = 2 * time.Second

// reopenAfterError bounds how often failing statistics reopen the
// session: an adapter that stays broken is re-enumerated (round trips to
// the Windows host) at most this often, not on every scrape.
const reopenAfterError = 30 * time.Second

// session is what a sample reads; *dxcore.Session is the one real one.
type session interface {
	Adapters() []dxcore.StatsAdapter
	Counts(dxcore.LUID) (dxcore.AdapterCounts, error)
	Segment(dxcore.LUID, int) (dxcore.Segment, error)
	VideoMemory(dxcore.LUID, dxcore.SegmentGroup) (dxcore.VideoMemoryInfo, error)
	Node(dxcore.LUID, int) (dxcore.Node, error)
	RunningTime(dxcore.LUID, int) (uint64, error)
	ProcessGroupUsage(dxcore.LUID, int, dxcore.SegmentGroup) (dxcore.GroupUsage, error)
	Close() error
}

func openSession(device string) (session, error) {
	s, err := dxcore.OpenSession(device)
	if err != nil {
		return nil, err // not a typed nil in the interface
	}
	return s, nil
}

// listLUIDs lists the adapters' LUIDs without asking the Windows host:
// ENUMADAPTERS3 is answered by the guest's kernel, and no adapter is
// queried.
func listLUIDs(device string) ([]dxcore.LUID, error) {
	var luids []dxcore.LUID
	_, err := dxcore.EnumerateWith(device, dxcore.Options{Known: func(l []dxcore.LUID) bool {
		luids = l
		return true
	}})
	return luids, err
}

type reading struct {
	seconds float64
	at      time.Time
}

// countingSession counts the calls a sample makes.
type countingSession struct{ n int }

// Open opens the device and enumerates the adapters.
func Open(opt Options) (*Sampler, error) {
	return open(opt, openSession, listLUIDs, time.Now)
}

func open(opt Options, openFn func(string) (session, error), list func(string) ([]dxcore.LUID, error), now func() time.Time) (*Sampler, error) {
	s, err := openFn(opt.Device)
	if err != nil {
		return nil, err
	}
	if opt.ProcRoot == "" {
		opt.ProcRoot = "/proc"
	}
	p := &Sampler{opt: opt, s: s, nodes: map[dxcore.LUID][]dxcore.Node{}, prev: map[string]reading{},
		now: now, open: openFn, list: list, opened: now(), scanWait: scanWait,
		ids: identities(s.Adapters(), opt.DriversDir)}
	p.scanProcs = func() ([]Process, error) {
		procs, err := DxgProcesses(opt.ProcRoot, opt.Device)
		if err != nil || len(opt.Names) == 0 {
			return procs, err
		}
		return procs, nameProcesses(procs, opt.Names)
	}
	return p, nil
}

// refresh opens a new session when the current one is stale (see
// Sampler), and says why it did, or why it could not.
func (p *Sampler) refresh(now time.Time) (note string) {
	why := ""
	if p.failed && now.Sub(p.opened) >= reopenAfterError {
		why = "an adapter's statistics failed"
	} else if luids, err := p.list(p.opt.Device); err == nil {
		var have []dxcore.LUID
		for _, a := range p.s.Adapters() {
			have = append(have, a.LUID)
		}
		if !slices.Equal(luids, have) {
			why = fmt.Sprintf("the host's adapters changed (%d listed, %d watched)", len(luids), len(have))
		}
	}
	if why == "" {
		return ""
	}
	s, err := p.open(p.opt.Device)
	if err != nil {
		return fmt.Sprintf("%s, and reopening %s failed: %v; the old adapters are still read", why, p.opt.Device, err)
	}
	_ = p.s.Close()
	p.s, p.opened, p.failed = s, now, false
	p.ids = identities(s.Adapters(), p.opt.DriversDir)
	clear(p.nodes)
	clear(p.prev)
	return ""
}

// Close releases the adapters and the device.
func (p *Sampler) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.s.Close()
}

// Adapters returns the adapters the sampler watches.
func (p *Sampler) Adapters() []dxcore.StatsAdapter {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.s.Adapters()
}

// Sample reads every adapter once.
func (p *Sampler) Sample() Sample {
	var procs []Process
	var procErr error
	if !p.opt.NoProcesses {
		procs, procErr = p.scan.get(p.now(), p.opt.ProcessRescan, p.scanWait, p.scanProcs)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	p.counter.n = 0
	reopenNote := p.refresh(now)
	out := Sample{Time: now}
	p.failed = false
	for _, a := range p.s.Adapters() {
		ad := p.adapter(a, procs, procErr)
		if ad.Error != "" {
			p.failed = true
			if reopenNote != "" {
				ad.Notes = append(ad.Notes, reopenNote)
			}
		}
		out.Adapters = append(out.Adapters, ad)
	}
	for i, id := range p.ids {
		out.Adapters[i].ID, out.Adapters[i].Kind, out.Adapters[i].Vendor = id.Name, string(id.Kind), string(id.Vendor)
	}
	out.Ioctls = p.counter.n
	out.Seconds = p.now().Sub(now).Seconds()
	return out
}

func (p *Sampler) adapter(a dxcore.StatsAdapter, procs []Process, procErr error) Adapter {
	out := Adapter{
		Index: a.Index, LUID: a.LUID.String(),
		Description: a.Description, DriverVersion: a.DriverVersion,
		Engines: []Engine{}, Processes: []ProcessUse{},
	}
	fail := func(what string, err error) Adapter {
		out.Error = fmt.Sprintf("%s: %v", what, err)
		return out
	}
	p.counter.n++
	counts, err := p.s.Counts(a.LUID)
	if err != nil {
		return fail("adapter statistics", err)
	}
	for id := range counts.Segments {
		p.counter.n++
		seg, err := p.s.Segment(a.LUID, id)
		if err != nil {
			return fail(fmt.Sprintf("segment %d", id), err)
		}
		m := &out.Local
		if seg.Aperture {
			m = &out.NonLocal
		}
		m.Total += seg.CommitLimit
		m.Used += seg.Resident
	}
	group := dxcore.SegmentGroupLocal
	if out.Local.Total == 0 {
		group = dxcore.SegmentGroupNonLocal
	}
	p.counter.n++
	if v, err := p.s.VideoMemory(a.LUID, group); err == nil {
		out.Budget = v.Budget
	}
	nodes, err := p.nodeList(a.LUID, counts.Nodes)
	if err != nil {
		return fail("engine metadata", err)
	}
	for _, n := range nodes {
		p.counter.n++
		ns, err := p.s.RunningTime(a.LUID, n.Ordinal)
		at := p.now()
		if err != nil {
			return fail(fmt.Sprintf("engine %d (%s)", n.Ordinal, n.Name), err)
		}
		e := Engine{Node: n.Ordinal, Name: n.Name, Kind: Kind(n), RunningSeconds: float64(ns) / 1e9}
		key := out.LUID + "/" + fmt.Sprint(n.Ordinal)
		if last, ok := p.prev[key]; ok && at.After(last.at) {
			busy, err := busyRatio(last.seconds, e.RunningSeconds, at.Sub(last.at).Seconds())
			if err != nil {
				e.Error = err.Error()
			} else {
				e.Busy = &busy
			}
		}
		p.prev[key] = reading{seconds: e.RunningSeconds, at: at}
		out.Engines = append(out.Engines, e)
	}
	if procErr != nil {
		out.Notes = append(out.Notes, "processes: "+procErr.Error())
	}
	out.Processes, out.Unattributed = p.processes(a, procs)
	return out
}

// busyRatio is the growth of a running-time counter over wall time. A
// counter that went backwards (adapter reset, TDR, host restart) or grew
// faster than time (a broken host) gives an error, never a figure.
func busyRatio(last, cur, dt float64) (float64, error) {
	d := cur - last
	switch {
	case d < 0:
		return 0, fmt.Errorf("running time went backwards by %.3f s (adapter reset?): busy ratio restarts with the next sample", -d)
	case d > dt*1.05+0.005:
		return 0, fmt.Errorf("running time grew %.3f s in %.3f s of wall time: the host's counter is broken", d, dt)
	}
	return min(d/dt, 1), nil
}

func (p *Sampler) nodeList(luid dxcore.LUID, count int) ([]dxcore.Node, error) {
	if n, ok := p.nodes[luid]; ok && len(n) == count {
		return n, nil
	}
	var nodes []dxcore.Node
	for i := range count {
		p.counter.n++
		n, err := p.s.Node(luid, i)
		if err != nil {
			// Without metadata the node still has a running time.
			n = dxcore.Node{Ordinal: i, Type: dxcore.EngineOther, Name: fmt.Sprintf("node%d", i)}
		}
		nodes = append(nodes, n)
	}
	p.nodes[luid] = nodes
	return nodes, nil
}

func (p *Sampler) processes(a dxcore.StatsAdapter, procs []Process) ([]ProcessUse, []Unattributed) {
	out := []ProcessUse{}
	var notes []Unattributed
	self := os.Getpid()
	for _, pr := range procs {
		if pr.PID == self {
			continue // this reader holds /dev/dxg too, and allocates nothing
		}
		if pr.Ambiguous {
			notes = append(notes, Unattributed{PID: pr.PID, Comm: pr.Comm, Reason: ReasonAmbiguous})
			continue
		}
		p.counter.n += 2
		l, err := p.s.ProcessGroupUsage(a.LUID, pr.NSPID, dxcore.SegmentGroupLocal)
		if err == nil {
			var nl dxcore.GroupUsage
			nl, err = p.s.ProcessGroupUsage(a.LUID, pr.NSPID, dxcore.SegmentGroupNonLocal)
			if err == nil {
				if l.Usage+nl.Usage > 0 {
					out = append(out, ProcessUse{Process: pr, Local: l.Usage, NonLocal: nl.Usage})
				}
				continue
			}
		}
		if errors.Is(err, dxcore.ErrProcessNotFound) {
			notes = append(notes, Unattributed{PID: pr.PID, Comm: pr.Comm, Reason: ReasonNotFound})
			continue
		}
		notes = append(notes, Unattributed{PID: pr.PID, Comm: pr.Comm, Reason: ReasonError, Error: err.Error()})
	}
	return out, notes
}

// Kind names an engine's kind for display and labels.
func Kind(n dxcore.Node) string {
	switch n.Type {
	case dxcore.Engine3D:
		return "3d"
	case dxcore.EngineVideoDecode:
		return "video_decode"
	case dxcore.EngineVideoEncode:
		return "video_encode"
	case dxcore.EngineVideoProcessing, dxcore.EngineVideoCodec:
		return "video_processing"
	case dxcore.EngineCopy:
		return "copy"
	}
	name := strings.ToLower(n.Name)
	if strings.HasPrefix(name, "compute") || strings.HasPrefix(name, "cuda") {
		return "compute"
	}
	return "other"
}

// KindBusy is the busiest node of each kind (Task Manager shows one graph
// per engine name; an adapter with two copy engines is as busy as the
// busier one). Kinds without a busy figure are absent.
func KindBusy(a Adapter) map[string]float64 {
	out := map[string]float64{}
	for _, e := range a.Engines {
		if e.Busy == nil {
			continue
		}
		if v, ok := out[e.Kind]; !ok || *e.Busy > v {
			out[e.Kind] = *e.Busy
		}
	}
	return out
}

// identities are the adapters' identities, in the session's order, which
// is the host's, with their vendors as driverstore.Build gives them. They
// are taken when a session opens, not at every sample: an adapter whose
// PCI vendor is unknown costs an lstat of its folder on the driver store
// share, and the adapters, so their folders, change only with a new
// session (Sampler).
func identities(adapters []dxcore.StatsAdapter, driversDir string) []adapterid.ID {
	das := make([]dxcore.Adapter, len(adapters))
	for i, a := range adapters {
		das[i] = a.Adapter
	}
	vendors := driverstore.AdapterVendors(das, driversDir)
	as := make([]driverstore.Adapter, len(adapters))
	for i, a := range das {
		as[i] = driverstore.Adapter{Adapter: a, Vendor: vendors[i]}
	}
	return adapterid.Of(as)
}
