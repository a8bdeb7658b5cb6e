package dxg

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/simhost"
)

// Config selects the simulated host and the faults it shows.
type Config struct {
	Profile simhost.Profile
	// OldKernel makes ENUMADAPTERS3 fail with ENOTTY, as on kernels
	// that predate it.
	OldKernel bool
	// ZeroAdapters makes the host report no adapters at all.
	ZeroAdapters bool
	// NTStatus returns failures as old 4.19-era drivers did: the raw
	// negative NTSTATUS as the ioctl result, errno untouched.
	NTStatus bool
	// QueryFail lists adapter indexes (host order, compute-only adapters
	// included) whose every QUERYADAPTERINFO fails with DEVICE_REMOVED.
	QueryFail []int
	// MissingFolder lists adapter indexes whose driver store path names a
	// folder that does not exist (another hash of the same inf).
	MissingFolder []int
	// Statistics (stats.go): Workload replaces the profile's modelled
	// load, Clock the model's time (default: since New); NoStats answers
	// LX_DXQUERYSTATISTICS with ENOTTY (kernels before it), NoStatsPID
	// refuses a pid as kernels without the pid lookup do.
	Workload            *simhost.Workload
	Clock               func() time.Duration
	NoStats, NoStatsPID bool
	// StatsFail lists adapter indexes whose statistics queries fail with
	// DEVICE_REMOVED while enumeration still works.
	StatsFail []int
	// StatsBackwards makes engine running times shrink as time passes,
	// as a broken host or a reset adapter would report them.
	StatsBackwards bool
	// HostLatency is added to every call the driver forwards to the
	// Windows host (see hostRoundTrip); 0 answers at once.
	HostLatency time.Duration
	// FolderFile, if set, is read at every driver store path query:
	// lines N=NAME make adapter N report folder NAME, as after a Windows
	// driver update while the VM runs.
	FolderFile string
	// RemovedFile, if set, is read at every enumeration: each line N
	// hides adapter N from the list, as when Windows removes or disables
	// the adapter while the VM runs. Handles already open keep answering.
	RemovedFile string
	// LUIDFile, if set, is read at every enumeration and LUID lookup:
	// lines N=0xHEX give adapter N that LUID, as after a WSL reboot (every
	// adapter gets a new one) or Windows restarting the adapter.
	LUIDFile string
}

// Validate reports every index that does not name an adapter.
func (c Config) Validate() error {
	n := len(c.Profile.Adapters)
	if c.ZeroAdapters {
		n = 0
	}
	var bad []string
	check := func(fault string, idx []int) {
		for _, i := range idx {
			if i < 0 || i >= n {
				bad = append(bad, fmt.Sprintf("%s=%d", fault, i))
			}
		}
	}
	check("query-fail", c.QueryFail)
	check("missing-folder", c.MissingFolder)
	check("stats-fail", c.StatsFail)
	if len(bad) > 0 && n == 0 {
		return fmt.Errorf("fault %s: the simulated host reports no adapters (profile %q or zero-adapters): drop the fault",
			strings.Join(bad, ", "), c.Profile.Name)
	}
	if len(bad) > 0 {
		return fmt.Errorf("fault %s: profile %q has %d adapters here (indexes 0..%d in host order, compute-only included)",
			strings.Join(bad, ", "), c.Profile.Name, n, n-1)
	}
	return nil
}

// Process identifies one process for its whole life: a pid alone is
// reused, pid plus start time (clock ticks after boot) is not.
type Process struct {
	TGID  int
	Start uint64
}

// Caller is the process making an ioctl.
type Caller struct {
	Process
	Comm string // for misuse messages
}

func (c Caller) String() string { return fmt.Sprintf("pid %d (%s)", c.TGID, c.Comm) }

// Memory is the calling process's address space.
type Memory interface {
	Read(addr uint64, b []byte) error
	Write(addr uint64, b []byte) error
}

// Result is the ioctl's outcome: it fails with Errno when that is set,
// otherwise it returns Val (negative only for old-driver NTSTATUS results).
type Result struct {
	Val   int64
	Errno syscall.Errno
	// Gone is set when the request stopped being live before anything
	// acted on it; no answer is needed.
	Gone bool
}

// Stats counts what happened, for the report.
type Stats struct {
	Calls         map[string]uint64
	Failures      map[string]uint64
	HandlesOpened uint64
	// HandlesClosed counts CLOSEADAPTER calls that closed a handle.
	HandlesClosed uint64
	// HandlesReleased counts handles freed with their process's last dxg
	// file instead of by CLOSEADAPTER: the driver frees a process's whole
	// handle table when that file is released (dxgk_release ->
	// dxgprocess_destroy), by close(2) or by the process's exit.
	HandlesReleased uint64
	// HandlesLeaked counts handles a process still held, with the device
	// still open, when dxgsim stopped, plus handles an ENUMADAPTERS3
	// overrun opened and never returned.
	HandlesLeaked uint64
	// ProcessesCreated and ProcessesDestroyed count the driver's process
	// objects: the first open of /dev/dxg by a process makes one on the
	// Windows host (dxgprocess_create -> dxgvmb_send_create_process, a
	// VM-bus message the opener waits on) and the release of its last dxg
	// file destroys it (dxgprocess_destroy -> dxgvmb_send_destroy_process).
	// Each is a host round trip.
	ProcessesCreated   uint64
	ProcessesDestroyed uint64
}

// maxMisuse bounds the misuse lines kept verbatim so a load test that
// misbehaves a million times cannot exhaust memory; the total still counts.
const maxMisuse = 200

// maxHandlesPerProcess bounds one process's handle table; a client that
// enumerates in a loop without closing fails with ENOMEM, not the sim.
const maxHandlesPerProcess = 1 << 16

// Kernel is the emulated driver plus host. It is safe for concurrent use.
type Kernel struct {
	cfg  Config
	host *host

	started time.Time
	mu      sync.Mutex
	procs   map[Process]*process
	// created holds the processes the driver made a host process object
	// for (Stats.ProcessesCreated), until they release it.
	created     map[Process]bool
	stats       Stats
	misuse      []string
	misuseTotal int
}

// process is the driver's per-process state: its handle table.
type process struct {
	comm string
	// nspid is the process's pid in its own pid namespace when it first
	// called: what dxgkrnl records (task_pid_vnr) and the statistics
	// calls name it by.
	nspid   uint64
	next    uint32         // handle counter: closed handles never come back
	handles map[uint32]int // handle -> adapter index
}

// New returns a kernel for cfg; cfg must Validate.
func New(cfg Config) (*Kernel, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Kernel{
		cfg:     cfg,
		started: time.Now(),
		host:    newHost(cfg),
		procs:   map[Process]*process{},
		created: map[Process]bool{},
		stats:   Stats{Calls: map[string]uint64{}, Failures: map[string]uint64{}},
	}, nil
}

// Ioctl performs one dxg ioctl for c. It reads the arguments and buffers
// from mem, then calls live; only if live returns true does it open or
// close handles and write results to mem.
func (k *Kernel) Ioctl(c Caller, req uint32, arg uint64, mem Memory, live func() bool) Result {
	name := RequestName(req)
	if k.createProcess(c.Process) {
		// On WSL the open before this call waited on it; the simulator
		// sees no open, only the process's first dxg call.
		k.hostRoundTrip()
	}
	var r Result
	switch req {
	case LX_DXENUMADAPTERS2:
		r = k.enumAdapters2(c, arg, mem, live)
	case LX_DXENUMADAPTERS3:
		r = k.enumAdapters3(c, arg, mem, live)
	case LX_DXCLOSEADAPTER:
		r = k.closeAdapter(c, arg, mem, live)
	case LX_DXOPENADAPTERFROMLUID:
		r = k.openAdapterFromLUID(c, arg, mem, live)
	case LX_DXQUERYADAPTERINFO:
		r = k.queryAdapterInfo(c, arg, mem, live)
	case LX_DXQUERYSTATISTICS:
		r = k.queryStatistics(c, arg, mem, live)
	case LX_DXQUERYVIDEOMEMORYINFO:
		r = k.queryVideoMemoryInfo(c, arg, mem, live)
	default:
		r = Result{Errno: syscall.ENOTTY}
	}
	if r.Gone {
		return r
	}
	k.mu.Lock()
	k.stats.Calls[name]++
	if r.Errno != 0 || r.Val < 0 {
		k.stats.Failures[name]++
	}
	k.mu.Unlock()
	return r
}

// fail is a failure the driver itself detects. Old drivers reported those
// as NTSTATUS too; ENOTTY comes from the ioctl dispatcher and stays errno.
func (k *Kernel) fail(e syscall.Errno) Result {
	if !k.cfg.NTStatus || e == syscall.ENOTTY {
		return Result{Errno: e}
	}
	nt := uint32(statusInvalidParameter)
	switch e {
	case syscall.EOVERFLOW:
		nt = statusBufferTooSmall
	case syscall.EPERM:
		nt = statusNotSupported
	case syscall.ENODEV:
		nt = statusDeviceRemoved
	case syscall.ENOMEM:
		nt = statusNoMemory
	case syscall.EACCES:
		nt = statusAccessDenied
	case syscall.EBADF:
		nt = statusInvalidHandle
	}
	return Result{Val: int64(int32(nt))}
}

// hostFail is a failure NTSTATUS from the host: current drivers translate
// it to an errno (ntstatus2int), old ones returned it raw.
func (k *Kernel) hostFail(nt uint32) Result {
	if k.cfg.NTStatus {
		return Result{Val: int64(int32(nt))}
	}
	return Result{Errno: ntstatusErrno(nt)}
}

// ntstatusErrno is the kernel's ntstatus2int (drivers/hv/dxgkrnl/
// dxgvmbus.c) for a failure status: the statuses it names, EINVAL for
// every other one, STATUS_NOT_FOUND included. Success codes (NT_SUCCESS,
// STATUS_TIMEOUT among them) give 0: the kernel carries on as if the host
// had succeeded.
func ntstatusErrno(nt uint32) syscall.Errno {
	if int32(nt) >= 0 {
		return 0
	}
	switch nt {
	case statusObjectNameCollision:
		return syscall.EEXIST
	case statusNoMemory:
		return syscall.ENOMEM
	case statusInvalidParameter:
		return syscall.EINVAL
	case statusObjectNameInvalid, statusObjectNameNotFound:
		return syscall.ENOENT
	case statusBufferTooSmall:
		return syscall.EOVERFLOW
	case statusDeviceRemoved:
		return syscall.ENODEV
	case statusAccessDenied:
		return syscall.EACCES
	case statusNotSupported, statusNotImplemented:
		return syscall.EPERM
	case statusIllegalInstruction:
		return syscall.EOPNOTSUPP
	case statusInvalidHandle:
		return syscall.EBADF
	case statusGraphicsAllocationBusy:
		return syscall.EINPROGRESS
	case statusObjectTypeMismatch:
		return syscall.EPROTOTYPE
	}
	return syscall.EINVAL
}

// copyFault is what the driver returns when copy_from_user or copy_to_user
// fails on a caller's pointer: the shipped driver's ioctl.c and dxgvmbus.c
// turn every such failure of the calls emulated here into EINVAL, not
// EFAULT (dxg-uapi.md). A later patch series ("Improve tracing and return
// values from copy from user") moves many of them to EFAULT; a client must
// not tell the two apart, and ours never passes a bad pointer.
const copyFault = syscall.EINVAL

func (k *Kernel) read(mem Memory, addr uint64, n int) ([]byte, bool) {
	b := make([]byte, n)
	if addr == 0 || mem.Read(addr, b) != nil {
		return nil, false
	}
	return b, true
}

// enumerable lists the adapter indexes an enumeration returns, in host
// order: compute-only (MCDM) adapters only when asked for.
func (k *Kernel) enumerable(includeComputeOnly bool) []int {
	var idx []int
	removed := k.host.removed()
	for i, a := range k.host.adapters {
		if a.ComputeOnly() && !includeComputeOnly || removed[i] {
			continue
		}
		idx = append(idx, i)
	}
	return idx
}

func (k *Kernel) enumAdapters2(c Caller, arg uint64, mem Memory, live func() bool) Result {
	args, ok := k.read(mem, arg, sizeEnumAdapters2)
	if !ok {
		return k.fail(copyFault)
	}
	capacity, adapters := le.Uint32(args[0:]), le.Uint64(args[8:])
	total := uint32(len(k.host.adapters))
	if adapters == 0 {
		if !live() {
			return Result{Gone: true}
		}
		return k.writeCount(mem, arg, total)
	}
	// The order matters: a capacity both too small and too large cannot
	// happen, but EOVERFLOW is checked first in the driver.
	if capacity < total {
		return k.fail(syscall.EOVERFLOW)
	}
	if capacity > adaptersMax {
		return k.fail(syscall.EINVAL)
	}
	// The driver allocates its array for capacity entries: vzalloc(0) is
	// NULL, so capacity 0 with an array (possible only when the host has
	// no adapters, else EOVERFLOW came first) fails with ENOMEM.
	if capacity == 0 {
		return k.fail(syscall.ENOMEM)
	}
	return k.fill(c, mem, arg, adapters, k.enumerable(false), live)
}

func (k *Kernel) enumAdapters3(c Caller, arg uint64, mem Memory, live func() bool) Result {
	if k.cfg.OldKernel {
		return Result{Errno: syscall.ENOTTY}
	}
	args, ok := k.read(mem, arg, sizeEnumAdapters3)
	if !ok {
		return k.fail(copyFault)
	}
	filter, capacity, adapters := le.Uint64(args[0:]), le.Uint32(args[8:]), le.Uint64(args[16:])
	countAt := arg + 8
	total := uint32(len(k.host.adapters))
	if adapters == 0 || capacity == 0 {
		if !live() {
			return Result{Gone: true}
		}
		return k.writeCount(mem, countAt, total)
	}
	if capacity > enum3CapacityMax {
		return k.fail(syscall.EINVAL)
	}
	list := k.enumerable(filter&filterIncludeComputeOnly != 0)
	if !live() {
		return Result{Gone: true}
	}
	if capacity < total {
		k.recordMisuse(fmt.Sprintf("%s: ENUMADAPTERS3 fill with capacity %d below the adapter count %d: "+
			"the real driver writes past its buffer and leaks handles; always pass capacity 64", c, capacity, total))
	}
	if uint32(len(list)) > capacity {
		// What the driver does after overrunning its array: handles
		// opened but never returned, the count written, success.
		k.mu.Lock()
		k.stats.HandlesOpened += uint64(len(list))
		k.stats.HandlesLeaked += uint64(len(list))
		k.mu.Unlock()
		return k.writeCount(mem, countAt, total)
	}
	return k.fill(c, mem, countAt, adapters, list, func() bool { return true })
}

// writeCount stores a u32 adapter count at addr and succeeds.
func (k *Kernel) writeCount(mem Memory, addr uint64, n uint32) Result {
	var b [4]byte
	le.PutUint32(b[:], n)
	if mem.Write(addr, b[:]) != nil {
		return k.fail(copyFault)
	}
	return Result{}
}

// fill opens one new handle per listed adapter, writes the count at
// countAt and the adapterinfo array at array. On a write fault the handles
// are closed again, as the driver does.
func (k *Kernel) fill(c Caller, mem Memory, countAt, array uint64, list []int, live func() bool) Result {
	if !live() {
		return Result{Gone: true}
	}
	handles, err := k.open(c, list)
	if err != 0 {
		return k.fail(err)
	}
	buf := make([]byte, sizeAdapterInfo*len(list))
	for n, i := range list {
		e := buf[n*sizeAdapterInfo:]
		le.PutUint32(e[0:], handles[n])
		low, high := k.host.luid(i)
		le.PutUint32(e[4:], low)
		le.PutUint32(e[8:], high)
		// num_sources and precise_present_regions stay 0: no display.
	}
	var cnt [4]byte
	le.PutUint32(cnt[:], uint32(len(list)))
	if mem.Write(countAt, cnt[:]) != nil || len(buf) > 0 && mem.Write(array, buf) != nil {
		k.closeAll(c.Process, handles)
		return k.fail(copyFault)
	}
	return Result{}
}

// open adds one handle per adapter index to c's handle table.
func (k *Kernel) open(c Caller, list []int) ([]uint32, syscall.Errno) {
	k.mu.Lock()
	defer k.mu.Unlock()
	p := k.procs[c.Process]
	if p == nil {
		p = &process{comm: c.Comm, nspid: nsPID(c.TGID), handles: map[uint32]int{}}
		k.procs[c.Process] = p
	}
	if len(p.handles)+len(list) > maxHandlesPerProcess {
		return nil, syscall.ENOMEM
	}
	hs := make([]uint32, len(list))
	for n, i := range list {
		hs[n] = handleBase + p.next*handleStep
		p.next++
		p.handles[hs[n]] = i
	}
	k.stats.HandlesOpened += uint64(len(list))
	return hs, 0
}

func (k *Kernel) closeAll(p Process, hs []uint32) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, h := range hs {
		delete(k.procs[p].handles, h)
	}
	k.stats.HandlesOpened -= uint64(len(hs))
}

// adapterOf returns the adapter index behind c's handle h.
func (k *Kernel) adapterOf(p Process, h uint32) (int, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if pr := k.procs[p]; pr != nil {
		i, ok := pr.handles[h]
		return i, ok
	}
	return 0, false
}

func (k *Kernel) closeAdapter(c Caller, arg uint64, mem Memory, live func() bool) Result {
	args, ok := k.read(mem, arg, sizeCloseAdapter)
	if !ok {
		return k.fail(copyFault)
	}
	if !live() {
		return Result{Gone: true}
	}
	h := le.Uint32(args)
	// dxgprocess_close_adapter returns 0 for handle 0 before it looks at
	// the handle table: the driver's own cleanup paths rely on it.
	if h == 0 {
		return Result{}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	p := k.procs[c.Process]
	if p == nil {
		return k.fail(syscall.EINVAL)
	}
	if _, ok := p.handles[h]; !ok {
		return k.fail(syscall.EINVAL)
	}
	delete(p.handles, h)
	k.stats.HandlesClosed++
	return Result{}
}

func (k *Kernel) openAdapterFromLUID(c Caller, arg uint64, mem Memory, live func() bool) Result {
	args, ok := k.read(mem, arg, sizeOpenAdapterFromLUID)
	if !ok {
		return k.fail(copyFault)
	}
	low, high := le.Uint32(args[0:]), le.Uint32(args[4:])
	idx := k.host.byLUID(low, high)
	if idx < 0 {
		return k.fail(syscall.EINVAL)
	}
	if !live() {
		return Result{Gone: true}
	}
	hs, err := k.open(c, []int{idx})
	if err != 0 {
		return k.fail(err)
	}
	var b [4]byte
	le.PutUint32(b[:], hs[0])
	if mem.Write(arg+8, b[:]) != nil {
		k.closeAll(c.Process, hs)
		return k.fail(copyFault)
	}
	return Result{}
}

func (k *Kernel) queryAdapterInfo(c Caller, arg uint64, mem Memory, live func() bool) Result {
	args, ok := k.read(mem, arg, sizeQueryAdapterInfo)
	if !ok {
		return k.fail(copyFault)
	}
	h, typ := le.Uint32(args[0:]), le.Uint32(args[4:])
	data, size := le.Uint64(args[8:]), le.Uint32(args[16:])
	if size == 0 || size > maxPrivateData {
		return k.fail(syscall.EINVAL)
	}
	idx, ok := k.adapterOf(c.Process, h)
	if !ok {
		return k.fail(syscall.EINVAL)
	}
	buf, ok := k.read(mem, data, int(size))
	if !ok {
		return k.fail(copyFault)
	}
	if !live() {
		return Result{Gone: true}
	}
	k.hostRoundTrip()
	if nt := k.host.queryAdapterInfo(idx, typ, buf); int32(nt) < 0 {
		return k.hostFail(nt)
	}
	if typ == qaiAdapterType || typ == qaiAdapterTypeRender {
		t := le.Uint32(buf)
		t |= typeParavirtualized
		t &^= typeDisplay | typePost | typeIndirectDisplay | typeACG | typeTimingsFromVidPN
		le.PutUint32(buf, t)
	}
	if mem.Write(data, buf) != nil {
		return k.fail(copyFault)
	}
	return Result{}
}

func (k *Kernel) recordMisuse(msg string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.recordMisuseLocked(msg)
}

func (k *Kernel) recordMisuseLocked(msg string) {
	k.misuseTotal++
	if len(k.misuse) < maxMisuse {
		k.misuse = append(k.misuse, msg)
	}
}

// Tracked lists the processes that have a handle table.
func (k *Kernel) Tracked() []Process {
	k.mu.Lock()
	defer k.mu.Unlock()
	ps := make([]Process, 0, len(k.procs))
	for p := range k.procs {
		ps = append(ps, p)
	}
	return ps
}

// Processes lists the processes the driver holds a process object for or a
// handle table of: what a supervisor that stops must settle.
func (k *Kernel) Processes() []Process {
	k.mu.Lock()
	defer k.mu.Unlock()
	ps := make([]Process, 0, len(k.created))
	for p := range k.created {
		ps = append(ps, p)
	}
	for p := range k.procs {
		if !k.created[p] {
			ps = append(ps, p)
		}
	}
	return ps
}

// createProcess records p's first dxg call and reports whether it was the
// first: the driver's process object for it is made on the host then.
func (k *Kernel) createProcess(p Process) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.created[p] {
		return false
	}
	k.created[p] = true
	k.stats.ProcessesCreated++
	return true
}

// ProcessExited drops p's handle table. Exit releases every file of the
// process and the driver frees a process's handles with its last dxg file,
// so handles still open are released, not leaked: a process that exits
// (or closes the device) without CLOSEADAPTER holds nothing afterwards.
// Calling it twice is harmless.
func (k *Kernel) ProcessExited(p Process) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.created[p] {
		delete(k.created, p)
		k.stats.ProcessesDestroyed++
	}
	if pr := k.procs[p]; pr != nil {
		k.stats.HandlesReleased += uint64(len(pr.handles))
	}
	delete(k.procs, p)
}

// ProcessReleased is ProcessExited for a process still running that holds
// no dxg file any more: closing its last one freed its handles.
func (k *Kernel) ProcessReleased(p Process) {
	k.ProcessExited(p)
}

// ProcessOutlived settles a process still running, with the device still
// open, when dxgsim stops: the handles it holds were never closed and will
// live as long as it does, which is the leak that matters, a long-lived
// process holding (and, enumerating again, piling up) handles. They are
// recorded as misuse.
func (k *Kernel) ProcessOutlived(p Process) {
	k.mu.Lock()
	defer k.mu.Unlock()
	pr := k.procs[p]
	delete(k.procs, p)
	if pr == nil || len(pr.handles) == 0 {
		return
	}
	hs := make([]uint32, 0, len(pr.handles))
	for h := range pr.handles {
		hs = append(hs, h)
	}
	sort.Slice(hs, func(a, b int) bool { return hs[a] < hs[b] })
	var list []string
	for n, h := range hs {
		if n == 8 {
			list = append(list, "...")
			break
		}
		list = append(list, fmt.Sprintf("0x%x", h))
	}
	k.stats.HandlesLeaked += uint64(len(hs))
	k.recordMisuseLocked(fmt.Sprintf("%s was still running with the device open when dxgsim stopped, holding %d adapter handle(s) never closed (%s): call CLOSEADAPTER for every handle an enumeration returns",
		Caller{Process: p, Comm: pr.comm}, len(hs), strings.Join(list, ", ")))
}

// Stats returns a copy of the counters.
func (k *Kernel) Stats() Stats {
	k.mu.Lock()
	defer k.mu.Unlock()
	s := k.stats
	s.Calls = copyMap(k.stats.Calls)
	s.Failures = copyMap(k.stats.Failures)
	return s
}

func copyMap(m map[string]uint64) map[string]uint64 {
	c := make(map[string]uint64, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// Misuse returns the recorded misuse lines (at most maxMisuse) and how
// many there were in total.
func (k *Kernel) Misuse() ([]string, int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.misuse...), k.misuseTotal
}
