package main

import (
	"encoding/binary"
	"fmt"
	"regexp"
	"sort"
	"sync"
	"unicode/utf16"

	"golang.org/x/sys/unix"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/simhost"
)

// ioctl request numbers of /dev/dxg (include/uapi/misc/d3dkmthk.h), written
// out literally from dxg-uapi.md rather than computed, so the simulator does
// not share a derivation with the client it checks.
const (
	reqOpenAdapterFromLUID = 0xC00C4701
	reqQueryAdapterInfo    = 0xC0184709
	reqEnumAdapters2       = 0xC0104714
	reqCloseAdapter        = 0xC0044715
	reqEnumAdapters3       = 0xC018473E
)

var requestNames = map[uint32]string{
	reqOpenAdapterFromLUID: "OPENADAPTERFROMLUID",
	reqQueryAdapterInfo:    "QUERYADAPTERINFO",
	reqEnumAdapters2:       "ENUMADAPTERS2",
	reqCloseAdapter:        "CLOSEADAPTER",
	reqEnumAdapters3:       "ENUMADAPTERS3",
}

// argSize is the size encoded in each request number.
func argSize(req uint32) int { return int(req>>16) & 0x3fff }

const (
	adaptersMax     = 64 // D3DKMT_ADAPTERS_MAX
	adapterInfoSize = 20
	maxPrivateData  = 128 << 10
	registryHeader  = 544
	registrySize    = 552
)

// Query types of QUERYADAPTERINFO.
const (
	qAdapterAddress    = 6
	qDriverVersion     = 13
	qAdapterType       = 15
	qUMDDriverVersion  = 18
	qPhysicalCount     = 30
	qPhysicalDeviceIDs = 31
	qQueryRegistry     = 48
	qKMDDriverVersion  = 49
	qAdapterTypeRender = 57
	qDriverDescription = 65
)

// NTSTATUS values a host returns, and the errno the kernel maps each to.
var ntstatus = map[unix.Errno]uint32{
	unix.EINVAL: 0xC000000D, // STATUS_INVALID_PARAMETER
	unix.ENODEV: 0xC00002B6, // STATUS_DEVICE_REMOVED
	unix.EPERM:  0xC00000BB, // STATUS_NOT_SUPPORTED
}

// faults are the injected failures.
type faults struct {
	oldKernel     bool
	queryFail     int // adapter index, -1 none
	missingFolder int
	zeroAdapters  bool
	denied        bool
	ntstatus      bool
}

// handle is an adapter handle the simulated kernel gave a process.
type handle struct {
	owner   int    // tgid
	start   string // the owner's start time, to tell pid reuse apart
	adapter int
}

// kernel is the simulated dxgkrnl + Windows host.
type kernel struct {
	adapters []simhost.Adapter
	faults   faults

	mu      sync.Mutex
	next    uint32
	handles map[uint32]handle
	calls   map[string]int
	opened  int
	closed  int
	misuse  []string
}

func newKernel(p simhost.Profile, f faults) *kernel {
	k := &kernel{faults: f, next: 0x40000000, handles: map[uint32]handle{}, calls: map[string]int{}}
	if !f.zeroAdapters {
		k.adapters = append(k.adapters, p.Adapters...)
	}
	if f.missingFolder >= 0 && f.missingFolder < len(k.adapters) {
		a := &k.adapters[f.missingFolder]
		// The same inf with another hash: what a Windows driver update
		// does while the VM still has the old folder mounted.
		a.DriverStorePath = staleHash.ReplaceAllString(a.DriverStorePath, "${1}ffffffffffffffff")
	}
	return k
}

var staleHash = regexp.MustCompile(`(?i)(_amd64_)[0-9a-f]{16}`)

// caller is the process an ioctl came from, with access to its memory.
type caller struct {
	tgid  int
	start string
	read  func(addr uint64, n int) ([]byte, error)
	write func(addr uint64, b []byte) error
	comm  string
}

// result is what the ioctl returns: val, or an errno.
type result struct {
	val   int64
	errno unix.Errno
}

func ok() result { return result{} }

func fail(e unix.Errno) result { return result{errno: e} }

// hostFail is a failure reported by the Windows host; with the ntstatus
// fault it comes back as old 4.19-era drivers returned it.
func (k *kernel) hostFail(e unix.Errno) result {
	if k.faults.ntstatus {
		if st, ok := ntstatus[e]; ok {
			return result{val: int64(int32(st))}
		}
	}
	return fail(e)
}

func (k *kernel) ioctl(c *caller, req uint32, argp uint64) result {
	k.mu.Lock()
	k.calls[requestNames[req]]++
	k.mu.Unlock()
	arg, err := c.read(argp, argSize(req))
	if err != nil {
		return fail(unix.EFAULT)
	}
	var r result
	switch req {
	case reqEnumAdapters2:
		r = k.enum2(c, arg)
	case reqEnumAdapters3:
		if k.faults.oldKernel {
			return fail(unix.ENOTTY)
		}
		r = k.enum3(c, arg)
	case reqCloseAdapter:
		r = k.closeAdapter(c, binary.LittleEndian.Uint32(arg))
	case reqOpenAdapterFromLUID:
		r = k.openFromLUID(c, arg)
	case reqQueryAdapterInfo:
		r = k.query(c, arg)
	default:
		return fail(unix.ENOTTY)
	}
	if r.errno == 0 && r.val == 0 {
		if err := c.write(argp, arg); err != nil {
			return fail(unix.EFAULT)
		}
	}
	return r
}

func (k *kernel) visible(includeComputeOnly bool) []int {
	var idx []int
	for i, a := range k.adapters {
		if a.ComputeOnly() && !includeComputeOnly {
			continue
		}
		idx = append(idx, i)
	}
	return idx
}

func (k *kernel) newHandle(c *caller, adapter int) uint32 {
	k.mu.Lock()
	defer k.mu.Unlock()
	h := k.next
	k.next += 0x40
	k.handles[h] = handle{owner: c.tgid, start: c.start, adapter: adapter}
	k.opened++
	return h
}

// fill writes one adapterinfo per adapter, each with a new handle.
func (k *kernel) fill(c *caller, ptr uint64, idx []int) result {
	buf := make([]byte, len(idx)*adapterInfoSize)
	for i, a := range idx {
		e := buf[i*adapterInfoSize:]
		binary.LittleEndian.PutUint32(e[0:], k.newHandle(c, a))
		binary.LittleEndian.PutUint32(e[4:], k.adapters[a].LUIDLow)
		binary.LittleEndian.PutUint32(e[8:], k.adapters[a].LUIDHigh)
	}
	if err := c.write(ptr, buf); err != nil {
		return fail(unix.EFAULT)
	}
	return ok()
}

func (k *kernel) enum2(c *caller, arg []byte) result {
	num := binary.LittleEndian.Uint32(arg[0:])
	ptr := binary.LittleEndian.Uint64(arg[8:])
	idx := k.visible(false) // ENUMADAPTERS2 never lists compute-only adapters
	if ptr == 0 {
		binary.LittleEndian.PutUint32(arg[0:], uint32(len(idx)))
		return ok()
	}
	if num > adaptersMax {
		return fail(unix.EINVAL)
	}
	if int(num) < len(idx) {
		return fail(unix.EOVERFLOW) // and the count is not written back
	}
	if r := k.fill(c, ptr, idx); r.errno != 0 {
		return r
	}
	binary.LittleEndian.PutUint32(arg[0:], uint32(len(idx)))
	return ok()
}

func (k *kernel) enum3(c *caller, arg []byte) result {
	filter := binary.LittleEndian.Uint64(arg[0:])
	count := binary.LittleEndian.Uint32(arg[8:])
	ptr := binary.LittleEndian.Uint64(arg[16:])
	idx := k.visible(filter&1 != 0)
	if ptr == 0 || count == 0 {
		binary.LittleEndian.PutUint32(arg[8:], uint32(len(idx)))
		return ok()
	}
	if count > adaptersMax {
		return fail(unix.EINVAL)
	}
	if int(count) < len(idx) {
		// The real kernel writes past its own buffer here and leaks
		// handles; the simulator only fills what fits, and says so.
		k.report("pid %d (%s): ENUMADAPTERS3 with capacity %d below the %d adapters: on a real kernel this corrupts kernel memory (pass 64)", c.tgid, c.comm, count, len(idx))
		idx = idx[:count]
	}
	if r := k.fill(c, ptr, idx); r.errno != 0 {
		return r
	}
	binary.LittleEndian.PutUint32(arg[8:], uint32(len(idx)))
	return ok()
}

// lookup returns the adapter of a handle the caller owns.
func (k *kernel) lookup(c *caller, h uint32) (int, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	hd, found := k.handles[h]
	if !found || hd.owner != c.tgid {
		return 0, false
	}
	return hd.adapter, true
}

func (k *kernel) closeAdapter(c *caller, h uint32) result {
	k.mu.Lock()
	defer k.mu.Unlock()
	hd, found := k.handles[h]
	if !found || hd.owner != c.tgid {
		return fail(unix.EINVAL)
	}
	delete(k.handles, h)
	k.closed++
	return ok()
}

func (k *kernel) openFromLUID(c *caller, arg []byte) result {
	lo, hi := binary.LittleEndian.Uint32(arg[0:]), binary.LittleEndian.Uint32(arg[4:])
	for i, a := range k.adapters {
		if a.LUIDLow == lo && a.LUIDHigh == hi {
			binary.LittleEndian.PutUint32(arg[8:], k.newHandle(c, i))
			return ok()
		}
	}
	return fail(unix.EINVAL)
}

func (k *kernel) query(c *caller, arg []byte) result {
	h := binary.LittleEndian.Uint32(arg[0:])
	typ := binary.LittleEndian.Uint32(arg[4:])
	ptr := binary.LittleEndian.Uint64(arg[8:])
	size := int(binary.LittleEndian.Uint32(arg[16:]))
	if size == 0 || size > maxPrivateData {
		return fail(unix.EINVAL)
	}
	ai, found := k.lookup(c, h)
	if !found {
		return fail(unix.EINVAL)
	}
	if k.faults.queryFail == ai {
		return k.hostFail(unix.ENODEV)
	}
	// The buffer travels to the host unchanged and exactly size bytes
	// come back.
	buf, err := c.read(ptr, size)
	if err != nil {
		return fail(unix.EFAULT)
	}
	a := k.adapters[ai]
	u32 := func(v uint32) result {
		if size != 4 {
			return k.hostFail(unix.EINVAL)
		}
		binary.LittleEndian.PutUint32(buf, v)
		return ok()
	}
	u64 := func(v uint64) result {
		if size != 8 {
			return k.hostFail(unix.EINVAL)
		}
		binary.LittleEndian.PutUint64(buf, v)
		return ok()
	}
	var r result
	switch typ {
	case qDriverVersion:
		r = u32(a.WDDMVersion)
	case qAdapterType, qAdapterTypeRender:
		r = u32(a.Flags)
	case qPhysicalCount:
		r = u32(1)
	case qUMDDriverVersion, qKMDDriverVersion:
		r = u64(0x0020_0010_0001_0000 | uint64(a.DeviceID))
	case qAdapterAddress:
		if size != 12 {
			return k.hostFail(unix.EINVAL)
		}
		binary.LittleEndian.PutUint32(buf[0:], uint32(ai+1))
		binary.LittleEndian.PutUint32(buf[4:], 0)
		binary.LittleEndian.PutUint32(buf[8:], 0)
	case qPhysicalDeviceIDs:
		if size != 28 || binary.LittleEndian.Uint32(buf[0:]) != 0 {
			return k.hostFail(unix.EINVAL)
		}
		for i, v := range []uint32{a.VendorID, a.DeviceID, a.SubVendorID, a.SubSystemID, a.RevisionID, 1 /* PCI */} {
			binary.LittleEndian.PutUint32(buf[4+4*i:], v)
		}
	case qDriverDescription:
		if size != 4096*2 {
			return k.hostFail(unix.EINVAL)
		}
		clear(buf)
		putUTF16(buf, a.Description)
	case qQueryRegistry:
		r = k.registry(buf, a)
	default:
		return k.hostFail(unix.EPERM)
	}
	if r.errno != 0 || r.val != 0 {
		return r
	}
	if err := c.write(ptr, buf); err != nil {
		return fail(unix.EFAULT)
	}
	return ok()
}

// registry answers QUERYREGISTRY for the driver store path: first the size
// (status BUFFER_OVERFLOW, success), then the value when it fits.
func (k *kernel) registry(buf []byte, a simhost.Adapter) result {
	if len(buf) < registrySize {
		return k.hostFail(unix.EINVAL)
	}
	const (
		statusSuccess  = 0
		statusOverflow = 1
		statusFail     = 2
	)
	qtype := binary.LittleEndian.Uint32(buf[0:])
	if qtype != 2 { // only DRIVERSTOREPATH is simulated
		binary.LittleEndian.PutUint32(buf[540:], statusFail)
		return ok()
	}
	value := utf16.Encode([]rune(a.DriverStorePath + "\x00"))
	need := len(value) * 2
	binary.LittleEndian.PutUint32(buf[536:], uint32(need))
	if len(buf)-registryHeader < need {
		binary.LittleEndian.PutUint32(buf[540:], statusOverflow)
		return ok()
	}
	for i, u := range value {
		binary.LittleEndian.PutUint16(buf[registryHeader+2*i:], u)
	}
	binary.LittleEndian.PutUint32(buf[540:], statusSuccess)
	return ok()
}

func putUTF16(buf []byte, s string) {
	for i, u := range utf16.Encode([]rune(s)) {
		if 2*i+2 > len(buf)-2 {
			break
		}
		binary.LittleEndian.PutUint16(buf[2*i:], u)
	}
}

func (k *kernel) report(format string, args ...any) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.misuse) < 1000 {
		k.misuse = append(k.misuse, fmt.Sprintf(format, args...))
	}
}

// leaks reports the handles never closed, per process.
func (k *kernel) leaks() {
	k.mu.Lock()
	per := map[int]int{}
	for _, h := range k.handles {
		per[h.owner]++
	}
	k.mu.Unlock()
	var pids []int
	for p := range per {
		pids = append(pids, p)
	}
	sort.Ints(pids)
	for _, p := range pids {
		k.report("pid %d left %d adapter handles open (CLOSEADAPTER every handle an enumeration returns)", p, per[p])
	}
}

// summary is the --report JSON.
type summary struct {
	Calls   map[string]int `json:"calls"`
	Opened  int            `json:"handlesOpened"`
	Closed  int            `json:"handlesClosed"`
	Open    int            `json:"handlesOpen"`
	Misuse  []string       `json:"misuse"`
	Profile string         `json:"profile"`
}

func (k *kernel) summary(profile string) summary {
	k.mu.Lock()
	defer k.mu.Unlock()
	calls := map[string]int{}
	for n, v := range k.calls {
		calls[n] = v
	}
	return summary{Calls: calls, Opened: k.opened, Closed: k.closed, Open: len(k.handles), Misuse: append([]string{}, k.misuse...), Profile: profile}
}
