// Command dxgprobe is dxgsim's test client: raw /dev/dxg ioctls written
// from dxg-uapi.md, sharing no code with pkg/host/dxcore or with dxgsim's
// emulator, so the tests compare two independent readings of the ABI.
//
//	dxgprobe DEVICE STEP...
//
// It opens DEVICE once and runs each step in order, printing one JSON line
// per step with the raw ioctl result (ret is the syscall's return value,
// errno its error), so tests see exactly what a client would. Steps:
//
//	count2                       ENUMADAPTERS2 count query
//	enum2:CAP                    ENUMADAPTERS2 fill with capacity CAP
//	count3:FILTER                ENUMADAPTERS3 count query
//	enum3:FILTER:CAP             ENUMADAPTERS3 fill
//	close:all | close:H          CLOSEADAPTER every handle enumerated so far, or H
//	query:I:TYPE:SIZE            QUERYADAPTERINFO on the I-th handle of the last
//	                             enumeration (or openluid)
//	queryh:H:TYPE:SIZE           the same on handle H
//	registry:I                   the two-step DRIVERSTOREPATH registry query, same I
//	openluid:LOW:HIGH            OPENADAPTERFROMLUID
//	child:STEP+STEP...           run those steps in a child process (own fd);
//	                             $N in them is this process's N-th handle
//	badarg:NAME                  the NAME ioctl (enum2, enum3, close, query,
//	                             openluid) with an argument pointer into the
//	                             never-mapped first page
//	enum2bad:CAP, enum3bad:CAP   a fill whose adapter array is in that page
//	querybad:I:TYPE:SIZE         a query whose private data is in that page
//	closefd                      close DEVICE's fd (later ioctls get EBADF)
//	sleep:MS                     sleep MS milliseconds
//
// The open itself is the first line ("op":"open"). dxgprobe exits 0 unless
// its arguments are wrong (2): the tests judge the results.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Request numbers, written out as dxg-uapi.md lists them.
const (
	ioctlOpenAdapterFromLUID = 0xC00C4701
	ioctlQueryAdapterInfo    = 0xC0184709
	ioctlEnumAdapters2       = 0xC0104714
	ioctlCloseAdapter        = 0xC0044715
	ioctlEnumAdapters3       = 0xC018473E
)

// Structures, laid out field by field as the reference gives them.
type adapterInfo struct {
	Handle       uint32
	LUIDLow      uint32
	LUIDHigh     uint32
	NumSources   uint32
	PresentFlags uint32
}

type enumAdapters2 struct {
	NumAdapters uint32
	Reserved    uint32
	Adapters    uint64
}

type enumAdapters3 struct {
	Filter       uint64
	AdapterCount uint32
	Reserved     uint32
	Adapters     uint64
}

type openAdapterFromLUID struct {
	LUIDLow, LUIDHigh uint32
	Handle            uint32
}

type queryAdapterInfo struct {
	Handle          uint32
	Type            uint32
	PrivateData     uint64
	PrivateDataSize uint32
	Pad             uint32
}

// Sizes the request numbers encode: each pair fails to compile unless the
// size is exact.
var (
	_ [20 - unsafe.Sizeof(adapterInfo{})]byte
	_ [unsafe.Sizeof(adapterInfo{}) - 20]byte
	_ [16 - unsafe.Sizeof(enumAdapters2{})]byte
	_ [unsafe.Sizeof(enumAdapters2{}) - 16]byte
	_ [24 - unsafe.Sizeof(enumAdapters3{})]byte
	_ [unsafe.Sizeof(enumAdapters3{}) - 24]byte
	_ [12 - unsafe.Sizeof(openAdapterFromLUID{})]byte
	_ [unsafe.Sizeof(openAdapterFromLUID{}) - 12]byte
	_ [24 - unsafe.Sizeof(queryAdapterInfo{})]byte
	_ [unsafe.Sizeof(queryAdapterInfo{}) - 24]byte
)

// capacity of every adapter array the probe passes: larger than any
// request, so a simulator that overruns the stated capacity still writes
// into memory the probe owns and the result can be inspected.
const arraySlots = 128

// Adapter is one adapterinfo entry as printed.
type Adapter struct {
	Handle   uint32 `json:"handle"`
	LUIDLow  uint32 `json:"luidLow"`
	LUIDHigh uint32 `json:"luidHigh"`
}

// Result is one step's line.
type Result struct {
	Op       string    `json:"op"`
	Ret      int64     `json:"ret"`
	Errno    int       `json:"errno"`
	Count    *uint32   `json:"count,omitempty"`
	Adapters []Adapter `json:"adapters,omitempty"`
	// QUERYADAPTERINFO: the first fields of the returned buffer, and
	// text for UTF-16 answers (description, registry path).
	U32    []uint32 `json:"u32,omitempty"`
	U64    *uint64  `json:"u64,omitempty"`
	Text   *string  `json:"text,omitempty"`
	Status *uint32  `json:"status,omitempty"` // registry status field
	Size   *uint32  `json:"size,omitempty"`   // registry output_value_size
	Handle *uint32  `json:"handle,omitempty"`
	Child  []Result `json:"child,omitempty"`
}

type probe struct {
	fd      int
	handles []uint32 // every handle enumerated or opened, in order
	last    []uint32 // those of the last enumeration or openluid
	open    map[uint32]bool
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: dxgprobe DEVICE STEP...")
		os.Exit(2)
	}
	enc := json.NewEncoder(os.Stdout)
	fd, err := unix.Open(os.Args[1], unix.O_RDONLY|unix.O_CLOEXEC, 0)
	errno := 0
	if err != nil {
		errno = int(err.(unix.Errno))
	}
	_ = enc.Encode(Result{Op: "open", Ret: int64(fd), Errno: errno})
	if err != nil {
		return
	}
	p := &probe{fd: fd, open: map[uint32]bool{}}
	for _, step := range os.Args[2:] {
		r, err := p.step(step)
		if err != nil {
			fmt.Fprintf(os.Stderr, "dxgprobe: step %q: %v\n", step, err)
			os.Exit(2)
		}
		_ = enc.Encode(r)
	}
}

func (p *probe) ioctl(req uintptr, arg unsafe.Pointer) (int64, int) {
	r1, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(p.fd), req, uintptr(arg))
	return int64(r1), int(e)
}

// badPointer is an address in the first page, which Linux never maps
// (vm.mmap_min_addr): any copy from or to it faults.
const badPointer = 8

// ioctlAt passes a raw address as the argument.
func (p *probe) ioctlAt(req, addr uintptr) (int64, int) {
	r1, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(p.fd), req, addr)
	return int64(r1), int(e)
}

func num(s string) (uint32, error) {
	v, err := strconv.ParseUint(s, 0, 32)
	return uint32(v), err
}

func (p *probe) step(step string) (Result, error) {
	f := strings.Split(step, ":")
	args := make([]uint32, 0, len(f))
	if f[0] != "child" && f[0] != "badarg" {
		for _, s := range f[1:] {
			if s == "all" {
				continue
			}
			v, err := num(s)
			if err != nil {
				return Result{}, err
			}
			args = append(args, v)
		}
	}
	want := map[string]int{"count2": 0, "enum2": 1, "count3": 1, "enum3": 2, "query": 3, "queryh": 3, "registry": 1, "openluid": 2,
		"enum2bad": 1, "enum3bad": 1, "querybad": 3, "closefd": 0, "sleep": 1}
	if f[0] == "badarg" {
		args = nil
	}
	if n, ok := want[f[0]]; ok && len(args) != n {
		return Result{}, fmt.Errorf("%s takes %d numbers", f[0], n)
	}
	switch f[0] {
	case "closefd":
		r := Result{Op: step}
		if err := unix.Close(p.fd); err != nil {
			r.Ret, r.Errno = -1, int(err.(unix.Errno))
		}
		return r, nil
	case "sleep":
		time.Sleep(time.Duration(args[0]) * time.Millisecond)
		return Result{Op: step}, nil
	case "count2":
		var a enumAdapters2
		r := Result{Op: step}
		r.Ret, r.Errno = p.ioctl(ioctlEnumAdapters2, unsafe.Pointer(&a))
		r.Count = &a.NumAdapters
		return r, nil
	case "enum2":
		arr := make([]adapterInfo, arraySlots)
		a := enumAdapters2{NumAdapters: args[0], Adapters: uint64(uintptr(unsafe.Pointer(&arr[0])))}
		r := Result{Op: step}
		r.Ret, r.Errno = p.ioctl(ioctlEnumAdapters2, unsafe.Pointer(&a))
		runtime.KeepAlive(arr)
		r.Count = &a.NumAdapters
		if r.Ret == 0 && r.Errno == 0 {
			r.Adapters = p.keep(arr, a.NumAdapters)
		}
		return r, nil
	case "count3":
		a := enumAdapters3{Filter: uint64(args[0])}
		r := Result{Op: step}
		r.Ret, r.Errno = p.ioctl(ioctlEnumAdapters3, unsafe.Pointer(&a))
		r.Count = &a.AdapterCount
		return r, nil
	case "enum3":
		arr := make([]adapterInfo, arraySlots)
		a := enumAdapters3{Filter: uint64(args[0]), AdapterCount: args[1], Adapters: uint64(uintptr(unsafe.Pointer(&arr[0])))}
		r := Result{Op: step}
		r.Ret, r.Errno = p.ioctl(ioctlEnumAdapters3, unsafe.Pointer(&a))
		runtime.KeepAlive(arr)
		r.Count = &a.AdapterCount
		if r.Ret == 0 && r.Errno == 0 {
			// Only what fits the stated capacity is the caller's.
			r.Adapters = p.keep(arr, min(a.AdapterCount, args[1]))
		}
		return r, nil
	case "close":
		if len(args) == 1 {
			return p.close(step, args[0]), nil
		}
		r := Result{Op: step}
		for _, h := range p.handles {
			if p.open[h] {
				if c := p.close(step, h); c.Ret != 0 || c.Errno != 0 {
					return c, nil
				}
			}
		}
		return r, nil
	case "query", "queryh":
		h := args[0]
		if f[0] == "query" {
			if int(h) >= len(p.last) {
				return Result{}, fmt.Errorf("no handle %d in the last enumeration", h)
			}
			h = p.last[h]
		}
		return p.query(step, h, args[1], args[2]), nil
	case "registry":
		if int(args[0]) >= len(p.last) {
			return Result{}, fmt.Errorf("no handle %d in the last enumeration", args[0])
		}
		return p.registry(step, p.last[args[0]]), nil
	case "openluid":
		a := openAdapterFromLUID{LUIDLow: args[0], LUIDHigh: args[1]}
		r := Result{Op: step}
		r.Ret, r.Errno = p.ioctl(ioctlOpenAdapterFromLUID, unsafe.Pointer(&a))
		if r.Ret == 0 && r.Errno == 0 {
			r.Handle = &a.Handle
			p.last = []uint32{a.Handle}
			p.handles = append(p.handles, a.Handle)
			p.open[a.Handle] = true
		}
		return r, nil
	case "child":
		return p.child(step, strings.TrimPrefix(step, "child:"))
	case "badarg":
		req, ok := map[string]uintptr{"enum2": ioctlEnumAdapters2, "enum3": ioctlEnumAdapters3, "close": ioctlCloseAdapter,
			"query": ioctlQueryAdapterInfo, "openluid": ioctlOpenAdapterFromLUID}[strings.TrimPrefix(step, "badarg:")]
		if !ok {
			return Result{}, fmt.Errorf("badarg takes enum2, enum3, close, query or openluid")
		}
		r := Result{Op: step}
		r.Ret, r.Errno = p.ioctlAt(req, badPointer)
		return r, nil
	case "enum2bad":
		a := enumAdapters2{NumAdapters: args[0], Adapters: badPointer}
		r := Result{Op: step}
		r.Ret, r.Errno = p.ioctl(ioctlEnumAdapters2, unsafe.Pointer(&a))
		r.Count = &a.NumAdapters
		return r, nil
	case "enum3bad":
		a := enumAdapters3{Filter: 1, AdapterCount: args[0], Adapters: badPointer}
		r := Result{Op: step}
		r.Ret, r.Errno = p.ioctl(ioctlEnumAdapters3, unsafe.Pointer(&a))
		r.Count = &a.AdapterCount
		return r, nil
	case "querybad":
		if int(args[0]) >= len(p.last) {
			return Result{}, fmt.Errorf("no handle %d in the last enumeration", args[0])
		}
		q := queryAdapterInfo{Handle: p.last[args[0]], Type: args[1], PrivateData: badPointer, PrivateDataSize: args[2]}
		r := Result{Op: step}
		r.Ret, r.Errno = p.ioctl(ioctlQueryAdapterInfo, unsafe.Pointer(&q))
		return r, nil
	}
	return Result{}, fmt.Errorf("unknown step")
}

func (p *probe) keep(arr []adapterInfo, n uint32) []Adapter {
	out := []Adapter{}
	p.last = nil
	for _, a := range arr[:min(n, arraySlots)] {
		p.last = append(p.last, a.Handle)
		out = append(out, Adapter{a.Handle, a.LUIDLow, a.LUIDHigh})
		p.handles = append(p.handles, a.Handle)
		p.open[a.Handle] = true
	}
	return out
}

func (p *probe) close(op string, h uint32) Result {
	r := Result{Op: op, Handle: &h}
	r.Ret, r.Errno = p.ioctl(ioctlCloseAdapter, unsafe.Pointer(&h))
	if r.Ret == 0 && r.Errno == 0 {
		delete(p.open, h)
	}
	return r
}

func (p *probe) query(op string, h, typ, size uint32) Result {
	buf := make([]byte, max(size, 8))
	q := queryAdapterInfo{Handle: h, Type: typ, PrivateData: uint64(uintptr(unsafe.Pointer(&buf[0]))), PrivateDataSize: size}
	r := Result{Op: op}
	r.Ret, r.Errno = p.ioctl(ioctlQueryAdapterInfo, unsafe.Pointer(&q))
	runtime.KeepAlive(buf)
	if r.Ret != 0 || r.Errno != 0 {
		return r
	}
	for i := 0; i+4 <= int(size) && i < 28; i += 4 {
		r.U32 = append(r.U32, le32(buf[i:]))
	}
	if size == 8 {
		v := uint64(le32(buf)) | uint64(le32(buf[4:]))<<32
		r.U64 = &v
	}
	if typ == 65 { // DRIVER_DESCRIPTION
		t := utf16z(buf)
		r.Text = &t
	}
	return r
}

// registry runs the documented sequence: 552 bytes with DRIVERSTOREPATH,
// then 552 + output_value_size.
func (p *probe) registry(op string, h uint32) Result {
	const info = 552
	call := func(size int) (Result, []byte) {
		buf := make([]byte, size)
		buf[0] = 2 // query_type DRIVERSTOREPATH
		q := queryAdapterInfo{Handle: h, Type: 48, PrivateData: uint64(uintptr(unsafe.Pointer(&buf[0]))), PrivateDataSize: uint32(size)}
		r := Result{Op: op}
		r.Ret, r.Errno = p.ioctl(ioctlQueryAdapterInfo, unsafe.Pointer(&q))
		runtime.KeepAlive(buf)
		st, sz := le32(buf[540:]), le32(buf[536:])
		r.Status, r.Size = &st, &sz
		return r, buf
	}
	first, _ := call(info)
	if first.Ret != 0 || first.Errno != 0 || *first.Status != 1 {
		return first
	}
	r, buf := call(info + int(*first.Size))
	r.Child = []Result{first} // the first call's answer, for the record
	if r.Ret == 0 && r.Errno == 0 && *r.Status == 0 {
		t := utf16z(buf[544 : 544+int(*r.Size)])
		r.Text = &t
	}
	return r
}

// child runs steps in a new process of its own (its own open of the same
// device): handles are per process.
func (p *probe) child(op, spec string) (Result, error) {
	steps := strings.Split(spec, "+")
	for i, s := range steps {
		for n := len(p.handles) - 1; n >= 0; n-- {
			s = strings.ReplaceAll(s, "$"+strconv.Itoa(n), fmt.Sprintf("0x%x", p.handles[n]))
		}
		steps[i] = s
	}
	self, err := os.Executable()
	if err != nil {
		return Result{}, err
	}
	out, err := exec.Command(self, append([]string{os.Args[1]}, steps...)...).Output()
	if err != nil {
		return Result{}, fmt.Errorf("child: %w", err)
	}
	r := Result{Op: op}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var c Result
		if err := dec.Decode(&c); err != nil {
			return Result{}, fmt.Errorf("child output: %w", err)
		}
		r.Child = append(r.Child, c)
	}
	return r, nil
}

func le32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

func utf16z(b []byte) string {
	var u []uint16
	for i := 0; i+1 < len(b); i += 2 {
		c := uint16(b[i]) | uint16(b[i+1])<<8
		if c == 0 {
			break
		}
		u = append(u, c)
	}
	return string(utf16.Decode(u))
}
