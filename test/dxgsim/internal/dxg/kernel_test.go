package dxg

import (
	"errors"
	"strings"
	"syscall"
	"testing"
	"unicode/utf16"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/simhost"
)

// memory is a fake address space: one flat region starting at base, with
// a bump allocator. Address 0 and anything outside the region fault.
type memory struct {
	base uint64
	buf  []byte
	top  uint64
}

const memBase = 0x7f0000000000

func newMemory() *memory { return &memory{base: memBase, buf: make([]byte, 1<<20)} }

var errFault = errors.New("fault")

func (m *memory) span(addr uint64, n int) ([]byte, error) {
	if addr < m.base || addr+uint64(n) > m.base+uint64(len(m.buf)) {
		return nil, errFault
	}
	return m.buf[addr-m.base : addr-m.base+uint64(n)], nil
}

func (m *memory) Read(addr uint64, b []byte) error {
	s, err := m.span(addr, len(b))
	if err == nil {
		copy(b, s)
	}
	return err
}

func (m *memory) Write(addr uint64, b []byte) error {
	s, err := m.span(addr, len(b))
	if err == nil {
		copy(s, b)
	}
	return err
}

// alloc returns the address of n fresh bytes, 8-aligned.
func (m *memory) alloc(n int) uint64 {
	a := m.base + m.top
	m.top += uint64(n+7) &^ 7
	return a
}

func (m *memory) u32(addr uint64) uint32 { b, _ := m.span(addr, 4); return le.Uint32(b) }
func (m *memory) put32(addr uint64, v uint32) {
	b, _ := m.span(addr, 4)
	le.PutUint32(b, v)
}
func (m *memory) put64(addr uint64, v uint64) {
	b, _ := m.span(addr, 8)
	le.PutUint64(b, v)
}

var alice = Caller{Process: Process{TGID: 100, Start: 5}, Comm: "alice"}

func always() bool { return true }

func newKernel(t *testing.T, cfg Config) *Kernel {
	t.Helper()
	k, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func profile(t *testing.T, name string) simhost.Profile {
	t.Helper()
	p, err := simhost.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

type entry struct{ handle, low, high uint32 }

// enum3 runs ENUMADAPTERS3 with the given filter and capacity and returns
// the result, the count written back and the entries.
func enum3(k *Kernel, c Caller, m *memory, filter uint64, capacity uint32) (Result, uint32, []entry) {
	args := m.alloc(sizeEnumAdapters3)
	arr := m.alloc(sizeAdapterInfo * int(max(capacity, 1)))
	m.put64(args, filter)
	m.put32(args+8, capacity)
	m.put64(args+16, arr)
	r := k.Ioctl(c, LX_DXENUMADAPTERS3, args, m, always)
	n := m.u32(args + 8)
	var es []entry
	for i := uint32(0); r.Errno == 0 && i < n && i < capacity; i++ {
		e := arr + uint64(i*sizeAdapterInfo)
		es = append(es, entry{m.u32(e), m.u32(e + 4), m.u32(e + 8)})
	}
	return r, n, es
}

// enum2 runs ENUMADAPTERS2 the same way; sentinel is stored in the count
// first so a test can tell whether it was written.
func enum2(k *Kernel, c Caller, m *memory, capacity uint32, withArray bool) (Result, uint32, []entry) {
	args := m.alloc(sizeEnumAdapters2)
	arr := m.alloc(sizeAdapterInfo * int(max(capacity, 1)))
	m.put32(args, capacity)
	if withArray {
		m.put64(args+8, arr)
	}
	r := k.Ioctl(c, LX_DXENUMADAPTERS2, args, m, always)
	n := m.u32(args)
	var es []entry
	for i := uint32(0); withArray && r.Errno == 0 && i < n; i++ {
		e := arr + uint64(i*sizeAdapterInfo)
		es = append(es, entry{m.u32(e), m.u32(e + 4), m.u32(e + 8)})
	}
	return r, n, es
}

func query(k *Kernel, c Caller, m *memory, h, typ uint32, data []byte) (Result, []byte) {
	args := m.alloc(sizeQueryAdapterInfo)
	buf := m.alloc(len(data))
	_ = m.Write(buf, data)
	m.put32(args, h)
	m.put32(args+4, typ)
	m.put64(args+8, buf)
	m.put32(args+16, uint32(len(data)))
	r := k.Ioctl(c, LX_DXQUERYADAPTERINFO, args, m, always)
	out := make([]byte, len(data))
	_ = m.Read(buf, out)
	return r, out
}

func closeAdapter(k *Kernel, c Caller, m *memory, h uint32) Result {
	args := m.alloc(4)
	m.put32(args, h)
	return k.Ioctl(c, LX_DXCLOSEADAPTER, args, m, always)
}

func TestEnumerateProfiles(t *testing.T) {
	for _, name := range simhost.Names() {
		t.Run(name, func(t *testing.T) {
			p := profile(t, name)
			k := newKernel(t, Config{Profile: p})
			m := newMemory()

			r, n, _ := enum3(k, alice, m, 0, 0)
			if r.Errno != 0 || n != uint32(len(p.Adapters)) {
				t.Fatalf("ENUMADAPTERS3 count = %d, %v; want %d", n, r.Errno, len(p.Adapters))
			}
			if r, n, _ := enum2(k, alice, m, 0, false); r.Errno != 0 || n != uint32(len(p.Adapters)) {
				t.Fatalf("ENUMADAPTERS2 count = %d, %v; want %d", n, r.Errno, len(p.Adapters))
			}

			tests := []struct {
				name   string
				enum   func() (Result, uint32, []entry)
				filter bool // compute-only adapters listed
			}{
				{"ENUMADAPTERS3 include compute-only", func() (Result, uint32, []entry) { return enum3(k, alice, m, 1, 64) }, true},
				{"ENUMADAPTERS3 without filter", func() (Result, uint32, []entry) { return enum3(k, alice, m, 0, 64) }, false},
				{"ENUMADAPTERS2", func() (Result, uint32, []entry) { return enum2(k, alice, m, 64, true) }, false},
			}
			seen := map[uint32]bool{}
			for _, tt := range tests {
				r, n, es := tt.enum()
				var want []simhost.Adapter
				for _, a := range p.Adapters {
					if tt.filter || !a.ComputeOnly() {
						want = append(want, a)
					}
				}
				if r.Errno != 0 || int(n) != len(want) || len(es) != len(want) {
					t.Fatalf("%s: n=%d entries=%d err=%v, want %d", tt.name, n, len(es), r.Errno, len(want))
				}
				for i, e := range es {
					if e.low != want[i].LUIDLow || e.high != want[i].LUIDHigh {
						t.Errorf("%s: entry %d LUID %#x:%#x, want %#x:%#x", tt.name, i, e.high, e.low, want[i].LUIDHigh, want[i].LUIDLow)
					}
					if seen[e.handle] || e.handle&0x40000000 == 0 {
						t.Errorf("%s: handle %#x reused or not driver-shaped", tt.name, e.handle)
					}
					seen[e.handle] = true
					if r := closeAdapter(k, alice, m, e.handle); r.Errno != 0 {
						t.Errorf("CLOSEADAPTER %#x: %v", e.handle, r.Errno)
					}
				}
			}
			k.ProcessExited(alice.Process)
			if msgs, n := k.Misuse(); n != 0 {
				t.Errorf("misuse after a clean run: %q", msgs)
			}
		})
	}
}

func TestEnumErrors(t *testing.T) {
	nvidia := profile(t, "nvidia-laptop") // 2 adapters
	tests := []struct {
		name      string
		cfg       Config
		run       func(k *Kernel, m *memory) (Result, uint32)
		wantErrno syscall.Errno
		wantVal   int64
		wantCount uint32 // the count field afterwards
		misuse    string
	}{
		{
			name: "ENUMADAPTERS2 capacity below count overflows and leaves the count",
			cfg:  Config{Profile: nvidia},
			run: func(k *Kernel, m *memory) (Result, uint32) {
				r, n, _ := enum2(k, alice, m, 1, true)
				return r, n
			},
			wantErrno: syscall.EOVERFLOW, wantCount: 1,
		},
		{
			name: "ENUMADAPTERS2 capacity above 64",
			cfg:  Config{Profile: nvidia},
			run: func(k *Kernel, m *memory) (Result, uint32) {
				r, n, _ := enum2(k, alice, m, 65, true)
				return r, n
			},
			wantErrno: syscall.EINVAL, wantCount: 65,
		},
		{
			name: "ENUMADAPTERS3 capacity above 64 is allowed",
			cfg:  Config{Profile: nvidia},
			run: func(k *Kernel, m *memory) (Result, uint32) {
				r, n, es := enum3(k, alice, m, 1, 65)
				for _, e := range es {
					closeAdapter(k, alice, m, e.handle)
				}
				return r, n
			},
			wantCount: 2,
		},
		{
			name: "ENUMADAPTERS3 capacity above 0xffff",
			cfg:  Config{Profile: nvidia},
			run: func(k *Kernel, m *memory) (Result, uint32) {
				args := m.alloc(sizeEnumAdapters3)
				m.put32(args+8, 0x10000)
				m.put64(args+16, memBase)
				return k.Ioctl(alice, LX_DXENUMADAPTERS3, args, m, always), m.u32(args + 8)
			},
			wantErrno: syscall.EINVAL, wantCount: 0x10000,
		},
		{
			name: "ENUMADAPTERS3 capacity below count is misuse",
			cfg:  Config{Profile: nvidia},
			run: func(k *Kernel, m *memory) (Result, uint32) {
				r, n, _ := enum3(k, alice, m, 1, 1)
				return r, n
			},
			wantCount: 2,
			misuse:    "ENUMADAPTERS3 fill with capacity 1 below the adapter count 2",
		},
		{
			name: "old kernel has no ENUMADAPTERS3",
			cfg:  Config{Profile: nvidia, OldKernel: true},
			run: func(k *Kernel, m *memory) (Result, uint32) {
				r, n, _ := enum3(k, alice, m, 1, 0)
				return r, n
			},
			wantErrno: syscall.ENOTTY,
		},
		{
			name: "zero adapters",
			cfg:  Config{Profile: nvidia, ZeroAdapters: true},
			run: func(k *Kernel, m *memory) (Result, uint32) {
				r, n, _ := enum3(k, alice, m, 1, 64)
				return r, n
			},
		},
		{
			name: "ntstatus: overflow is STATUS_BUFFER_TOO_SMALL in the result",
			cfg:  Config{Profile: nvidia, NTStatus: true},
			run: func(k *Kernel, m *memory) (Result, uint32) {
				r, n, _ := enum2(k, alice, m, 1, true)
				return r, n
			},
			wantVal: int64(int32(-0x3fffffdd)), wantCount: 1, // 0xC0000023
		},
		{
			name: "bad argument pointer",
			cfg:  Config{Profile: nvidia},
			run: func(k *Kernel, m *memory) (Result, uint32) {
				return k.Ioctl(alice, LX_DXENUMADAPTERS3, 8, m, always), 0
			},
			wantErrno: syscall.EINVAL,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := newKernel(t, tt.cfg)
			r, n := tt.run(k, newMemory())
			if r.Errno != tt.wantErrno || r.Val != tt.wantVal {
				t.Errorf("result = (%d, %v), want (%d, %v)", r.Val, r.Errno, tt.wantVal, tt.wantErrno)
			}
			if n != tt.wantCount {
				t.Errorf("count field = %d, want %d", n, tt.wantCount)
			}
			msgs, total := k.Misuse()
			switch {
			case tt.misuse == "" && total != 0:
				t.Errorf("unexpected misuse %q", msgs)
			case tt.misuse != "" && (total != 1 || !strings.Contains(msgs[0], tt.misuse)):
				t.Errorf("misuse = %q, want one containing %q", msgs, tt.misuse)
			}
		})
	}
}

func TestHandlesArePerProcess(t *testing.T) {
	k := newKernel(t, Config{Profile: profile(t, "amd-desktop")})
	m := newMemory()
	bob := Caller{Process: Process{TGID: 200, Start: 9}, Comm: "bob"}
	// Same pid as alice, later start: pid reuse, a different process.
	alice2 := Caller{Process: Process{TGID: alice.TGID, Start: alice.Start + 1}, Comm: "alice2"}

	_, _, es := enum3(k, alice, m, 1, 64)
	h := es[0].handle
	for _, c := range []Caller{bob, alice2} {
		if r, _ := query(k, c, m, h, qaiDriverVersion, make([]byte, 4)); r.Errno != syscall.EINVAL {
			t.Errorf("%s querying alice's handle: %v, want EINVAL", c, r.Errno)
		}
		if r := closeAdapter(k, c, m, h); r.Errno != syscall.EINVAL {
			t.Errorf("%s closing alice's handle: %v, want EINVAL", c, r.Errno)
		}
	}
	if r := closeAdapter(k, alice, m, h); r.Errno != 0 {
		t.Fatalf("alice closing her handle: %v", r.Errno)
	}
	if r := closeAdapter(k, alice, m, h); r.Errno != syscall.EINVAL {
		t.Errorf("closing twice: %v, want EINVAL", r.Errno)
	}
	_, _, es = enum3(k, alice, m, 1, 64)
	if es[0].handle == h {
		t.Errorf("new enumeration reused closed handle %#x", h)
	}
}

// Handles a process never closed die with its last dxg file: its exit
// releases them, as the driver's dxgk_release does, and nothing is misuse.
func TestUnclosedHandlesAreReleasedAtExit(t *testing.T) {
	k := newKernel(t, Config{Profile: profile(t, "nvidia-laptop")})
	m := newMemory()
	_, _, es := enum3(k, alice, m, 1, 64)
	closeAdapter(k, alice, m, es[0].handle)
	k.ProcessExited(alice.Process)
	k.ProcessExited(alice.Process)
	if msgs, total := k.Misuse(); total != 0 {
		t.Errorf("misuse = %q, want none", msgs)
	}
	if s := k.Stats(); s.HandlesOpened != 2 || s.HandlesClosed != 1 || s.HandlesReleased != 1 || s.HandlesLeaked != 0 {
		t.Errorf("stats = %+v", s)
	}
	if len(k.Tracked()) != 0 {
		t.Errorf("tracked after exit: %v", k.Tracked())
	}
}

// A process still running with the device open when dxgsim stops keeps its
// handles: that is the leak, reported once.
func TestHandlesHeldAtStopAreMisuse(t *testing.T) {
	k := newKernel(t, Config{Profile: profile(t, "nvidia-laptop")})
	m := newMemory()
	bob := Caller{Process: Process{TGID: 200, Start: 9}, Comm: "bob"}
	_, _, es := enum3(k, alice, m, 1, 64)
	enum3(k, bob, m, 1, 64)
	closeAdapter(k, alice, m, es[0].handle)
	k.ProcessOutlived(alice.Process)
	k.ProcessOutlived(alice.Process)
	k.ProcessReleased(bob.Process) // closed the device: released
	msgs, total := k.Misuse()
	want := "pid 100 (alice) was still running with the device open when dxgsim stopped, holding 1 adapter handle(s) never closed (0x40000040)"
	if total != 1 || !strings.HasPrefix(msgs[0], want) {
		t.Errorf("misuse = %q, want one starting %q", msgs, want)
	}
	if s := k.Stats(); s.HandlesOpened != 4 || s.HandlesClosed != 1 || s.HandlesReleased != 2 || s.HandlesLeaked != 1 {
		t.Errorf("stats = %+v", s)
	}
}

func TestGoneRequestChangesNothing(t *testing.T) {
	k := newKernel(t, Config{Profile: profile(t, "nvidia-laptop")})
	m := newMemory()
	args := m.alloc(sizeEnumAdapters3)
	arr := m.alloc(sizeAdapterInfo * 64)
	m.put64(args, 1)
	m.put32(args+8, 64)
	m.put64(args+16, arr)
	r := k.Ioctl(alice, LX_DXENUMADAPTERS3, args, m, func() bool { return false })
	if !r.Gone || m.u32(args+8) != 64 || m.u32(arr) != 0 {
		t.Errorf("gone request acted: %+v count=%d", r, m.u32(args+8))
	}
	if len(k.Tracked()) != 0 {
		t.Errorf("gone request opened handles")
	}
}

func TestQueryAdapterInfo(t *testing.T) {
	p := profile(t, "intel-npu")
	u32 := func(v uint32) []byte { b := make([]byte, 4); le.PutUint32(b, v); return b }
	tests := []struct {
		name      string
		cfg       Config
		adapter   int
		typ       uint32
		in        []byte
		wantErrno syscall.Errno
		wantVal   int64
		check     func(t *testing.T, out []byte)
	}{
		{name: "DRIVERVERSION", typ: qaiDriverVersion, in: make([]byte, 4),
			check: func(t *testing.T, out []byte) { eq(t, le.Uint32(out), p.Adapters[0].WDDMVersion) }},
		{name: "DRIVERVERSION wrong size", typ: qaiDriverVersion, in: make([]byte, 8), wantErrno: syscall.EINVAL},
		{name: "ADAPTERTYPE", typ: qaiAdapterType, in: make([]byte, 4),
			check: func(t *testing.T, out []byte) { eq(t, le.Uint32(out), p.Adapters[0].Flags) }},
		{name: "ADAPTERTYPE_RENDER of the NPU", adapter: 1, typ: qaiAdapterTypeRender, in: make([]byte, 4),
			check: func(t *testing.T, out []byte) { eq(t, le.Uint32(out), p.Adapters[1].Flags) }},
		{name: "PHYSICALADAPTERCOUNT", typ: qaiPhysicalAdapterCount, in: make([]byte, 4),
			check: func(t *testing.T, out []byte) { eq(t, le.Uint32(out), 1) }},
		{name: "PHYSICALADAPTERDEVICEIDS", adapter: 1, typ: qaiPhysicalAdapterDeviceIDs, in: make([]byte, 28),
			check: func(t *testing.T, out []byte) {
				a := p.Adapters[1]
				for i, want := range []uint32{0, a.VendorID, a.DeviceID, a.SubVendorID, a.SubSystemID, a.RevisionID} {
					eq(t, le.Uint32(out[4*i:]), want)
				}
			}},
		{name: "PHYSICALADAPTERDEVICEIDS physical index 1", typ: qaiPhysicalAdapterDeviceIDs,
			in: append(u32(1), make([]byte, 24)...), wantErrno: syscall.EINVAL},
		{name: "ADAPTERADDRESS", typ: qaiAdapterAddress, in: make([]byte, 12),
			check: func(t *testing.T, out []byte) { eq(t, le.Uint32(out[4:]), 2) }},
		{name: "UMD_DRIVER_VERSION", typ: qaiUMDDriverVersion, in: make([]byte, 8),
			check: func(t *testing.T, out []byte) { eq(t, uint32(le.Uint64(out)>>48), 32) }},
		{name: "DRIVER_DESCRIPTION", typ: qaiDriverDescription, in: make([]byte, 8192),
			check: func(t *testing.T, out []byte) { eq(t, decodeUTF16(out), p.Adapters[0].Description) }},
		{name: "unknown type", typ: 1, in: make([]byte, 4), wantErrno: syscall.EPERM},
		{name: "size 0", typ: qaiDriverVersion, in: nil, wantErrno: syscall.EINVAL},
		{name: "size above 128 KiB", typ: qaiQueryRegistry, in: make([]byte, 128*1024+1), wantErrno: syscall.EINVAL},
		{name: "query-fail", cfg: Config{QueryFail: []int{1}}, adapter: 1, typ: qaiDriverVersion, in: make([]byte, 4),
			wantErrno: syscall.ENODEV},
		{name: "query-fail spares other adapters", cfg: Config{QueryFail: []int{1}}, typ: qaiDriverVersion, in: make([]byte, 4)},
		{name: "query-fail ntstatus", cfg: Config{QueryFail: []int{0}, NTStatus: true}, typ: qaiDriverVersion,
			in: make([]byte, 4), wantVal: int64(int32(-0x3ffffd4a))}, // 0xC00002B6
		{name: "ntstatus wrong size", cfg: Config{NTStatus: true}, typ: qaiDriverVersion,
			in: make([]byte, 3), wantVal: int64(int32(-0x3ffffff3))}, // 0xC000000D
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.Profile = p
			k := newKernel(t, tt.cfg)
			m := newMemory()
			_, _, es := enum3(k, alice, m, 1, 64)
			r, out := query(k, alice, m, es[tt.adapter].handle, tt.typ, tt.in)
			if r.Errno != tt.wantErrno || r.Val != tt.wantVal {
				t.Fatalf("result = (%#x, %v), want (%#x, %v)", r.Val, r.Errno, tt.wantVal, tt.wantErrno)
			}
			if tt.check != nil {
				tt.check(t, out)
			}
		})
	}
}

func TestQueryRegistry(t *testing.T) {
	p := profile(t, "nvidia-laptop")
	tests := []struct {
		name    string
		missing bool
	}{{"driver store path", false}, {"missing folder", true}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Config{Profile: p}
			if tt.missing {
				cfg.MissingFolder = []int{1}
			}
			k := newKernel(t, cfg)
			m := newMemory()
			_, _, es := enum3(k, alice, m, 1, 64)
			in := make([]byte, sizeRegistryInfo)
			le.PutUint32(in, regTypeDriverStorePath)
			r, out := query(k, alice, m, es[1].handle, qaiQueryRegistry, in)
			if r.Errno != 0 || le.Uint32(out[regStatus:]) != regStatusBufferOverflow {
				t.Fatalf("first call: %v status %d", r.Errno, le.Uint32(out[regStatus:]))
			}
			need := le.Uint32(out[regOutputSize:])
			want := p.Adapters[1].DriverStorePath
			eq(t, need, uint32(2*len(want)+2))

			short := make([]byte, sizeRegistryInfo+int(need)-8)
			le.PutUint32(short, regTypeDriverStorePath)
			if r, out := query(k, alice, m, es[1].handle, qaiQueryRegistry, short); r.Errno != 0 ||
				le.Uint32(out[regStatus:]) != regStatusBufferOverflow {
				t.Errorf("8 bytes short: %v status %d, want overflow", r.Errno, le.Uint32(out[regStatus:]))
			}

			full := make([]byte, sizeRegistryInfo+int(need))
			le.PutUint32(full, regTypeDriverStorePath)
			r, out = query(k, alice, m, es[1].handle, qaiQueryRegistry, full)
			if r.Errno != 0 || le.Uint32(out[regStatus:]) != regStatusSuccess {
				t.Fatalf("second call: %v status %d", r.Errno, le.Uint32(out[regStatus:]))
			}
			got := decodeUTF16(out[regOutput:])
			if !tt.missing {
				eq(t, got, want)
				return
			}
			base := want[:strings.LastIndexByte(want, '_')+1]
			if got == want || !strings.HasPrefix(got, base) || len(got) != len(want) {
				t.Errorf("moved path %q, want %q with another hash", got, base)
			}
		})
	}
}

// The host sizes its answer by the request's private data size, not by
// output_value_size (an output): a first request with room for the path
// gets it at once, one a byte short gets BUFFER_OVERFLOW and the size, as
// the Windows host answers Windows' own 1072-byte request for this path.
func TestQueryRegistryFirstRequest(t *testing.T) {
	p := profile(t, "nvidia-laptop")
	want := p.Adapters[0].DriverStorePath
	need := 2*len(want) + 2
	tests := []struct {
		name       string
		size       int
		outputSize uint32 // what the request carries in output_value_size
		wantStatus uint32
	}{
		{"room for 260 UTF-16 units", sizeRegistryInfo + 520, 0, regStatusSuccess},
		{"exactly the structure and the value", sizeRegistryInfo + need, 0, regStatusSuccess},
		{"one byte short", sizeRegistryInfo + need - 1, 0, regStatusBufferOverflow},
		{"output_value_size claims room the buffer lacks", sizeRegistryInfo, 4096, regStatusBufferOverflow},
		{"far more room than needed", 64 << 10, 0, regStatusSuccess},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := newKernel(t, Config{Profile: p})
			m := newMemory()
			_, _, es := enum3(k, alice, m, 1, 64)
			in := make([]byte, tt.size)
			le.PutUint32(in, regTypeDriverStorePath)
			le.PutUint32(in[regOutputSize:], tt.outputSize)
			r, out := query(k, alice, m, es[0].handle, qaiQueryRegistry, in)
			if r.Errno != 0 || le.Uint32(out[regStatus:]) != tt.wantStatus {
				t.Fatalf("%d bytes: %v status %d, want status %d", tt.size, r.Errno, le.Uint32(out[regStatus:]), tt.wantStatus)
			}
			eq(t, le.Uint32(out[regOutputSize:]), uint32(need))
			if tt.wantStatus == regStatusSuccess {
				eq(t, decodeUTF16(out[regOutput:]), want)
			}
		})
	}
}

func TestOpenAdapterFromLUID(t *testing.T) {
	p := profile(t, "compute-only")
	k := newKernel(t, Config{Profile: p})
	m := newMemory()
	args := m.alloc(sizeOpenAdapterFromLUID)
	m.put32(args, p.Adapters[0].LUIDLow)
	if r := k.Ioctl(alice, LX_DXOPENADAPTERFROMLUID, args, m, always); r.Errno != 0 {
		t.Fatalf("known LUID: %v", r.Errno)
	}
	h := m.u32(args + 8)
	if r, out := query(k, alice, m, h, qaiAdapterType, make([]byte, 4)); r.Errno != 0 || le.Uint32(out)&simhost.FlagComputeOnly == 0 {
		t.Errorf("query through the LUID handle: %v %#x", r.Errno, le.Uint32(out))
	}
	m.put32(args, 0xdead)
	if r := k.Ioctl(alice, LX_DXOPENADAPTERFROMLUID, args, m, always); r.Errno != syscall.EINVAL {
		t.Errorf("unknown LUID: %v, want EINVAL", r.Errno)
	}
}

func TestConfigValidate(t *testing.T) {
	p := profile(t, "nvidia-laptop")
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"in range", Config{Profile: p, QueryFail: []int{1}, MissingFolder: []int{0}}, ""},
		{"out of range", Config{Profile: p, QueryFail: []int{2}, MissingFolder: []int{-1}},
			`fault query-fail=2, missing-folder=-1: profile "nvidia-laptop" has 2 adapters here (indexes 0..1 in host order, compute-only included)`},
		{"zero adapters", Config{Profile: p, ZeroAdapters: true, QueryFail: []int{0}},
			`fault query-fail=0: the simulated host reports no adapters (profile "nvidia-laptop" or zero-adapters): drop the fault`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			got := ""
			if err != nil {
				got = err.Error()
			}
			eq(t, got, tt.want)
		})
	}
}

func decodeUTF16(b []byte) string {
	var u []uint16
	for i := 0; i+1 < len(b); i += 2 {
		c := le.Uint16(b[i:])
		if c == 0 {
			break
		}
		u = append(u, c)
	}
	return string(utf16.Decode(u))
}

func eq[T comparable](t *testing.T, got, want T) {
	t.Helper()
	if got != want {
		t.Errorf("got %v, want %v", got, want)
	}
}

// TestNTStatusErrno pins the emulated ntstatus2int (drivers/hv/dxgkrnl/
// dxgvmbus.c, values from misc.h) status by status.
func TestNTStatusErrno(t *testing.T) {
	tests := []struct {
		name string
		nt   uint32
		want syscall.Errno
	}{
		{"OBJECT_NAME_COLLISION", 0xC0000035, syscall.EEXIST},
		{"NO_MEMORY", 0xC0000017, syscall.ENOMEM},
		{"INVALID_PARAMETER", 0xC000000D, syscall.EINVAL},
		{"OBJECT_NAME_INVALID", 0xC0000033, syscall.ENOENT},
		{"OBJECT_NAME_NOT_FOUND", 0xC0000034, syscall.ENOENT},
		{"BUFFER_TOO_SMALL", 0xC0000023, syscall.EOVERFLOW},
		{"DEVICE_REMOVED", 0xC00002B6, syscall.ENODEV},
		{"ACCESS_DENIED", 0xC0000022, syscall.EACCES},
		{"NOT_SUPPORTED", 0xC00000BB, syscall.EPERM},
		{"NOT_IMPLEMENTED", 0xC0000002, syscall.EPERM},
		{"ILLEGAL_INSTRUCTION", 0xC000001D, syscall.EOPNOTSUPP},
		{"INVALID_HANDLE", 0xC0000008, syscall.EBADF},
		{"GRAPHICS_ALLOCATION_BUSY", 0xC01E0102, syscall.EINPROGRESS},
		{"OBJECT_TYPE_MISMATCH", 0xC0000024, syscall.EPROTOTYPE},
		{"NOT_FOUND is not translated", 0xC0000225, syscall.EINVAL},
		{"UNSUCCESSFUL is not translated", 0xC0000001, syscall.EINVAL},
		{"TIMEOUT is a success code", 0x00000102, 0},
		{"SUCCESS", 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ntstatusErrno(tt.nt); got != tt.want {
				t.Errorf("ntstatusErrno(%#x) = %v, want %v", tt.nt, got, tt.want)
			}
		})
	}
}

// faultMemory is memory whose writes to one range fault, as a read-only or
// unmapped page in the caller would.
type faultMemory struct {
	*memory
	from, to uint64
}

func (m faultMemory) Write(addr uint64, b []byte) error {
	if addr < m.to && addr+uint64(len(b)) > m.from {
		return errFault
	}
	return m.memory.Write(addr, b)
}

// TestKernelCornerCases are the rules the driver's source settles that a
// client meets only by mistake: each must be neither stricter nor looser
// than the kernel.
func TestKernelCornerCases(t *testing.T) {
	nvidia := profile(t, "nvidia-laptop")
	const unmapped = 8 // below the fake region: every access faults
	tests := []struct {
		name      string
		cfg       Config
		run       func(k *Kernel, m *memory) Result
		wantErrno syscall.Errno
		wantVal   int64
		open      int // handles alice holds afterwards
	}{
		{
			name: "ENUMADAPTERS2 capacity 0 with an array, no adapters: ENOMEM",
			cfg:  Config{Profile: nvidia, ZeroAdapters: true},
			run: func(k *Kernel, m *memory) Result {
				r, _, _ := enum2(k, alice, m, 0, true)
				return r
			},
			wantErrno: syscall.ENOMEM,
		},
		{
			name: "ENUMADAPTERS2 capacity 0 with an array, adapters present: EOVERFLOW first",
			cfg:  Config{Profile: nvidia},
			run: func(k *Kernel, m *memory) Result {
				r, _, _ := enum2(k, alice, m, 0, true)
				return r
			},
			wantErrno: syscall.EOVERFLOW,
		},
		{
			name: "ENUMADAPTERS2 capacity 0 with an array, old driver: STATUS_NO_MEMORY",
			cfg:  Config{Profile: nvidia, ZeroAdapters: true, NTStatus: true},
			run: func(k *Kernel, m *memory) Result {
				r, _, _ := enum2(k, alice, m, 0, true)
				return r
			},
			wantVal: -0x3fffffe9, // 0xC0000017 as a negative result
		},
		{
			name:      "CLOSEADAPTER(0) succeeds, before any handle exists",
			cfg:       Config{Profile: nvidia},
			run:       func(k *Kernel, m *memory) Result { return closeAdapter(k, alice, m, 0) },
			wantErrno: 0,
		},
		{
			name: "CLOSEADAPTER(0) succeeds with handles open, and closes none",
			cfg:  Config{Profile: nvidia},
			run: func(k *Kernel, m *memory) Result {
				enum3(k, alice, m, 1, 64)
				return closeAdapter(k, alice, m, 0)
			},
			open: 2,
		},
		{
			name:      "CLOSEADAPTER argument fault: EINVAL",
			cfg:       Config{Profile: nvidia},
			run:       func(k *Kernel, m *memory) Result { return k.Ioctl(alice, LX_DXCLOSEADAPTER, unmapped, m, always) },
			wantErrno: syscall.EINVAL,
		},
		{
			name:      "ENUMADAPTERS2 argument fault: EINVAL",
			cfg:       Config{Profile: nvidia},
			run:       func(k *Kernel, m *memory) Result { return k.Ioctl(alice, LX_DXENUMADAPTERS2, unmapped, m, always) },
			wantErrno: syscall.EINVAL,
		},
		{
			name: "ENUMADAPTERS2 array fault: EINVAL, the handles closed again",
			cfg:  Config{Profile: nvidia},
			run: func(k *Kernel, m *memory) Result {
				args := m.alloc(sizeEnumAdapters2)
				m.put32(args, 64)
				m.put64(args+8, unmapped)
				return k.Ioctl(alice, LX_DXENUMADAPTERS2, args, m, always)
			},
			wantErrno: syscall.EINVAL,
		},
		{
			name: "ENUMADAPTERS3 array fault: EINVAL, the handles closed again",
			cfg:  Config{Profile: nvidia},
			run: func(k *Kernel, m *memory) Result {
				args := m.alloc(sizeEnumAdapters3)
				m.put32(args+8, 64)
				m.put64(args+16, unmapped)
				return k.Ioctl(alice, LX_DXENUMADAPTERS3, args, m, always)
			},
			wantErrno: syscall.EINVAL,
		},
		{
			name: "ENUMADAPTERS3 count written to a read-only page: EINVAL",
			cfg:  Config{Profile: nvidia},
			run: func(k *Kernel, m *memory) Result {
				args := m.alloc(sizeEnumAdapters3)
				return k.Ioctl(alice, LX_DXENUMADAPTERS3, args, faultMemory{m, args + 8, args + 12}, always)
			},
			wantErrno: syscall.EINVAL,
		},
		{
			name: "OPENADAPTERFROMLUID handle written to a read-only page: EINVAL, the handle closed again",
			cfg:  Config{Profile: nvidia},
			run: func(k *Kernel, m *memory) Result {
				args := m.alloc(sizeOpenAdapterFromLUID)
				m.put32(args, nvidia.Adapters[0].LUIDLow)
				m.put32(args+4, nvidia.Adapters[0].LUIDHigh)
				return k.Ioctl(alice, LX_DXOPENADAPTERFROMLUID, args, faultMemory{m, args + 8, args + 12}, always)
			},
			wantErrno: syscall.EINVAL,
		},
		{
			name: "QUERYADAPTERINFO private data fault: EINVAL",
			cfg:  Config{Profile: nvidia},
			run: func(k *Kernel, m *memory) Result {
				_, _, es := enum3(k, alice, m, 1, 64)
				defer closeAll(k, m, es)
				args := m.alloc(sizeQueryAdapterInfo)
				m.put32(args, es[0].handle)
				m.put32(args+4, qaiDriverVersion)
				m.put64(args+8, unmapped)
				m.put32(args+16, 4)
				return k.Ioctl(alice, LX_DXQUERYADAPTERINFO, args, m, always)
			},
			wantErrno: syscall.EINVAL,
		},
		{
			name: "QUERYADAPTERINFO answer written to a read-only page: EINVAL",
			cfg:  Config{Profile: nvidia},
			run: func(k *Kernel, m *memory) Result {
				_, _, es := enum3(k, alice, m, 1, 64)
				defer closeAll(k, m, es)
				args, buf := m.alloc(sizeQueryAdapterInfo), m.alloc(4)
				m.put32(args, es[0].handle)
				m.put32(args+4, qaiDriverVersion)
				m.put64(args+8, buf)
				m.put32(args+16, 4)
				return k.Ioctl(alice, LX_DXQUERYADAPTERINFO, args, faultMemory{m, buf, buf + 4}, always)
			},
			wantErrno: syscall.EINVAL,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := newKernel(t, tt.cfg)
			r := tt.run(k, newMemory())
			if r.Errno != tt.wantErrno || r.Val != tt.wantVal {
				t.Errorf("result = (%#x, %v), want (%#x, %v)", r.Val, r.Errno, tt.wantVal, tt.wantErrno)
			}
			s := k.Stats()
			if open := int(s.HandlesOpened - s.HandlesClosed); open != tt.open {
				t.Errorf("alice holds %d handles afterwards, want %d", open, tt.open)
			}
		})
	}
}

func closeAll(k *Kernel, m *memory, es []entry) {
	for _, e := range es {
		closeAdapter(k, alice, m, e.handle)
	}
}
