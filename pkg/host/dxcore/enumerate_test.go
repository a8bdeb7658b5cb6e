package dxcore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/simhost"
	"golang.org/x/sys/unix"
)

// fakeAdapter is one adapter as the fake kernel and host know it.
type fakeAdapter struct {
	luid        LUID
	computeOnly bool
	// answers fills a query's private data by query type; a missing type
	// fails with EINVAL as the kernel does for a host error.
	answers map[uint32]func(data []byte) error
}

// fakeKernel plays /dev/dxg per the documented kernel semantics, and
// records what a real kernel would punish: wrong capacities, unknown or
// double closes, handles left open.
type fakeKernel struct {
	t        *testing.T
	adapters []fakeAdapter
	no3, no2 error // answer to an unknown call, nil when the call is known
	// arriveOnFill2 adds an adapter just before that many ENUMADAPTERS2
	// fill calls, as a hot-plugged adapter would.
	arriveOnFill2 int
	// failFill3 makes the ENUMADAPTERS3 fill fail after its count query.
	failFill3 error
	// overCount3 makes the ENUMADAPTERS3 fill claim more than capacity.
	overCount3 bool

	next   uint32
	open   map[uint32]int // handle -> adapter index
	calls  []string       // the enumerate calls
	closed int
	// ioctls is every call in order, one word each, for the sequence
	// tests: e3 and e2 fills (with their capacity) and counts, q<type>/<size>
	// for QUERYADAPTERINFO, close.
	ioctls []string
}

func newFakeKernel(t *testing.T, adapters ...fakeAdapter) *fakeKernel {
	return &fakeKernel{t: t, adapters: adapters, next: 0x40000000, open: map[uint32]int{}}
}

func (k *fakeKernel) openHandles(infos []byte, include func(fakeAdapter) bool) uint32 {
	var out []adapterInfo
	for i, a := range k.adapters {
		if !include(a) {
			continue
		}
		k.next += 0x40
		k.open[k.next] = i
		out = append(out, adapterInfo{handle: k.next, luid: a.luid})
	}
	encodeAdapterInfos(infos, out)
	return uint32(len(out))
}

func (k *fakeKernel) enumAdapters3(filter uint64, infos []byte) (uint32, error) {
	if infos == nil {
		k.ioctls = append(k.ioctls, "e3count")
	} else {
		k.ioctls = append(k.ioctls, fmt.Sprintf("e3fill/%d", len(infos)/sizeofAdapterInfo))
	}
	if k.no3 != nil {
		// The dispatcher refuses an unknown call before looking at it.
		k.calls = append(k.calls, "enum3 unknown")
		return 0, k.no3
	}
	if infos == nil {
		k.calls = append(k.calls, "enum3 count")
		return uint32(len(k.adapters)), nil
	}
	k.calls = append(k.calls, fmt.Sprintf("enum3 fill cap=%d", len(infos)/sizeofAdapterInfo))
	if len(infos)/sizeofAdapterInfo != adaptersMax {
		k.t.Errorf("ENUMADAPTERS3 fill with capacity %d: a real kernel writes past its buffer", len(infos)/sizeofAdapterInfo)
	}
	if k.failFill3 != nil {
		return 0, k.failFill3
	}
	n := k.openHandles(infos, func(a fakeAdapter) bool { return !a.computeOnly || filter&enumFilterComputeOnly != 0 })
	if k.overCount3 {
		n = adaptersMax + 1
	}
	return n, nil
}

func (k *fakeKernel) enumAdapters2(infos []byte) (uint32, error) {
	if infos == nil {
		k.ioctls = append(k.ioctls, "e2count")
	} else {
		k.ioctls = append(k.ioctls, fmt.Sprintf("e2fill/%d", len(infos)/sizeofAdapterInfo))
	}
	if k.no2 != nil {
		k.calls = append(k.calls, "enum2 unknown")
		return 0, k.no2
	}
	if infos == nil {
		k.calls = append(k.calls, "enum2 count")
		return uint32(len(k.adapters)), nil
	}
	capacity := len(infos) / sizeofAdapterInfo
	k.calls = append(k.calls, fmt.Sprintf("enum2 fill cap=%d", capacity))
	if k.arriveOnFill2 > 0 {
		k.arriveOnFill2--
		k.adapters = append(k.adapters, profileAdapter(simhost.Adapter{LUIDLow: 0x9000 + uint32(len(k.adapters))}, nil))
	}
	if capacity < len(k.adapters) {
		return 0, unix.EOVERFLOW
	}
	if capacity > adaptersMax {
		return 0, unix.EINVAL
	}
	return k.openHandles(infos, func(a fakeAdapter) bool { return !a.computeOnly }), nil
}

func (k *fakeKernel) queryAdapterInfo(handle, typ uint32, data []byte) error {
	k.ioctls = append(k.ioctls, fmt.Sprintf("q%d/%d", typ, len(data)))
	i, ok := k.open[handle]
	if !ok || len(data) == 0 || len(data) > 128<<10 {
		return unix.EINVAL
	}
	answer, ok := k.adapters[i].answers[typ]
	if !ok {
		return unix.EINVAL
	}
	return answer(data)
}

func (k *fakeKernel) closeAdapter(handle uint32) error {
	k.ioctls = append(k.ioctls, "close")
	if _, ok := k.open[handle]; !ok {
		k.t.Errorf("CLOSEADAPTER of handle %#x that is not open", handle)
		return unix.EINVAL
	}
	delete(k.open, handle)
	k.closed++
	return nil
}

// checkClosed fails the test if any handle the fake opened is still open.
// finished checks what every enumeration must leave: no open handle, the
// ioctl sequence wantCalls, and err matching wantErr. It reports whether
// an error was expected, which ends the case.
func (k *fakeKernel) finished(wantCalls []string, err error, wantErr string) bool {
	k.t.Helper()
	k.checkClosed()
	if !reflect.DeepEqual(k.calls, wantCalls) {
		k.t.Errorf("calls = %q, want %q", k.calls, wantCalls)
	}
	if wantErr == "" {
		return false
	}
	if err == nil || err.Error() != wantErr {
		k.t.Fatalf("err = %v, want %q", err, wantErr)
	}
	return true
}

func (k *fakeKernel) checkClosed() {
	k.t.Helper()
	if len(k.open) != 0 {
		k.t.Errorf("%d adapter handles left open: %v", len(k.open), k.open)
	}
}

func putU32(v uint32) func([]byte) error {
	return func(b []byte) error { binary.LittleEndian.PutUint32(b, v); return nil }
}

// hostRegistry answers QUERYREGISTRY(DRIVERSTOREPATH) like the Windows
// host: the NUL-terminated path when the request has room for it after the
// 552-byte structure (PrivateDriverDataSize >= sizeof(info) + value),
// otherwise BUFFER_OVERFLOW and the size it needs.
func hostRegistry(path string) func([]byte) error {
	return growingRegistry(path)
}

// growingRegistry is hostRegistry for a value that changes between
// requests: the i-th request sees paths[min(i, len-1)].
func growingRegistry(paths ...string) func([]byte) error {
	calls := 0
	return func(b []byte) error {
		value := append(utf16le(paths[min(calls, len(paths)-1)]), 0, 0)
		calls++
		if len(b) < 552 || binary.LittleEndian.Uint32(b[0:]) != regTypeDriverStorePath {
			return unix.EINVAL
		}
		binary.LittleEndian.PutUint32(b[536:], uint32(len(value)))
		if len(b) < 552+len(value) {
			binary.LittleEndian.PutUint32(b[540:], regStatusBufferOverflow)
			return nil
		}
		binary.LittleEndian.PutUint32(b[540:], regStatusSuccess)
		copy(b[544:], value)
		return nil
	}
}

func profileAdapter(a simhost.Adapter, override map[uint32]func([]byte) error) fakeAdapter {
	answers := map[uint32]func([]byte) error{
		qaiDriverVersion:     putU32(a.WDDMVersion),
		qaiAdapterType:       putU32(a.Flags),
		qaiAdapterTypeRender: putU32(a.Flags),
		qaiPhysicalAdapterDevIDs: func(b []byte) error {
			if binary.LittleEndian.Uint32(b) != 0 {
				return unix.EINVAL
			}
			for i, v := range []uint32{a.VendorID, a.DeviceID, a.SubVendorID, a.SubSystemID, a.RevisionID, 0} {
				binary.LittleEndian.PutUint32(b[4+4*i:], v)
			}
			return nil
		},
		qaiQueryRegistry: hostRegistry(a.DriverStorePath),
		qaiUMDDriverVersion: func(b []byte) error {
			if len(b) != 8 {
				return unix.EINVAL
			}
			binary.LittleEndian.PutUint64(b, 32<<48|15<<16|6094)
			return nil
		},
		qaiGetSegmentSize: func(b []byte) error {
			if len(b) != sizeofSegmentSizeInfo {
				return unix.EINVAL
			}
			binary.LittleEndian.PutUint64(b, a.DedicatedMemory)
			binary.LittleEndian.PutUint64(b[16:], 8<<30)
			return nil
		},
		qaiDriverDescription: func(b []byte) error {
			copy(b, append(utf16le(a.Description), 0, 0))
			return nil
		},
	}
	if a.DriverStorePath == "" {
		answers[qaiQueryRegistry] = hostRegistry(`C:\Windows\System32\DriverStore\FileRepository\x.inf_amd64_0`)
	}
	for typ, f := range override {
		if f == nil {
			delete(answers, typ)
		} else {
			answers[typ] = f
		}
	}
	return fakeAdapter{
		luid:        LUID{Low: a.LUIDLow, High: int32(a.LUIDHigh)},
		computeOnly: a.ComputeOnly(),
		answers:     answers,
	}
}

func wantAdapter(i int, a simhost.Adapter) Adapter {
	return Adapter{
		Index:       i,
		LUID:        LUID{Low: a.LUIDLow, High: int32(a.LUIDHigh)},
		WDDMVersion: a.WDDMVersion,
		Type:        AdapterType(a.Flags),
		PCI: PCIIDs{Vendor: a.VendorID, Device: a.DeviceID, SubVendor: a.SubVendorID,
			SubSystem: a.SubSystemID, Revision: a.RevisionID},
		Description:     a.Description,
		DriverStorePath: a.DriverStorePath,
	}
}

func TestEnumerateProfiles(t *testing.T) {
	for _, name := range simhost.Names() {
		t.Run(name, func(t *testing.T) {
			p, err := simhost.Lookup(name)
			if err != nil {
				t.Fatal(err)
			}
			var fakes []fakeAdapter
			var want []Adapter
			for i, a := range p.Adapters {
				fakes = append(fakes, profileAdapter(a, nil))
				want = append(want, wantAdapter(i, a))
			}
			k := newFakeKernel(t, fakes...)
			e, err := enumerate(k)
			k.checkClosed()
			if len(p.Adapters) == 0 {
				if !errors.Is(err, ErrNoAdapters) || e != nil {
					t.Fatalf("enumerate = %v, %v; want nil, ErrNoAdapters", e, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if e.Ioctl != "ENUMADAPTERS3" || len(e.Skipped) != 0 {
				t.Errorf("Ioctl = %q, Skipped = %v", e.Ioctl, e.Skipped)
			}
			if !reflect.DeepEqual(e.Adapters, want) {
				t.Errorf("adapters:\n got %+v\nwant %+v", e.Adapters, want)
			}
			if k.closed != len(p.Adapters) {
				t.Errorf("closed %d handles, want %d", k.closed, len(p.Adapters))
			}
		})
	}
}

func mustProfile(t *testing.T, name string) []simhost.Adapter {
	t.Helper()
	p, err := simhost.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	return p.Adapters
}

func TestEnumerateFallbackToEnumAdapters2(t *testing.T) {
	npu := mustProfile(t, "intel-npu") // a GPU and a compute-only NPU
	for _, unknown := range []error{unix.ENOTTY, unix.EINVAL, ntStatus(0xC000000D)} {
		t.Run(unknown.Error(), func(t *testing.T) {
			k := newFakeKernel(t, profileAdapter(npu[0], nil), profileAdapter(npu[1], nil))
			k.no3 = unknown
			e, err := enumerate(k)
			k.checkClosed()
			if err != nil {
				t.Fatal(err)
			}
			if e.Ioctl != "ENUMADAPTERS2" {
				t.Errorf("Ioctl = %q, want ENUMADAPTERS2", e.Ioctl)
			}
			// ENUMADAPTERS2 never lists compute-only adapters.
			if len(e.Adapters) != 1 || e.Adapters[0] != wantAdapter(0, npu[0]) {
				t.Errorf("adapters = %+v, want only the GPU", e.Adapters)
			}
			want := []string{"enum3 unknown", "enum2 count", "enum2 fill cap=2"}
			if !reflect.DeepEqual(k.calls, want) {
				t.Errorf("calls = %q, want %q", k.calls, want)
			}
		})
	}
}

// An ENUMADAPTERS3 fill that fails for a reason other than an unknown call
// is the answer: no fallback. ENOTTY or EINVAL from the fill, the first
// call sent, says the kernel lacks ENUMADAPTERS3: a fill that fails closes
// what it opened, so the fallback leaves nothing open.
func TestEnumerateFill3Errors(t *testing.T) {
	gpu := mustProfile(t, "amd-desktop")[0]
	tests := []struct {
		err       error
		wantCalls []string
		wantErr   string
	}{
		{unix.ENOMEM, []string{"enum3 fill cap=64"}, "LX_DXENUMADAPTERS3: cannot allocate memory"},
		{unix.ENODEV, []string{"enum3 fill cap=64"}, "LX_DXENUMADAPTERS3: no such device"},
		{unix.EINVAL, []string{"enum3 fill cap=64", "enum2 count", "enum2 fill cap=1"}, ""},
		{unix.ENOTTY, []string{"enum3 fill cap=64", "enum2 count", "enum2 fill cap=1"}, ""},
		// qemu-user answers every ioctl number missing from its table with
		// ENOSYS without a system call: the kernel never saw it, and
		// ENUMADAPTERS2 would meet the same refusal.
		{unix.ENOSYS, []string{"enum3 fill cap=64"}, "LX_DXENUMADAPTERS3: function not implemented: the dxg ioctls never reached the kernel: an emulator (qemu-user) runs this binary and does not pass them on: run the build for this machine's architecture"},
	}
	for _, tt := range tests {
		t.Run(tt.err.Error(), func(t *testing.T) {
			k := newFakeKernel(t, profileAdapter(gpu, nil))
			k.failFill3 = tt.err
			e, err := enumerate(k)
			if errors.Is(tt.err, unix.ENOSYS) && !errors.Is(err, ErrEmulated) {
				t.Errorf("err = %v, want ErrEmulated", err)
			}
			if k.finished(tt.wantCalls, err, tt.wantErr) {
				return
			}
			if err != nil || e.Ioctl != "ENUMADAPTERS2" || len(e.Adapters) != 1 {
				t.Fatalf("enumerate = %+v, %v; want the GPU through ENUMADAPTERS2", e, err)
			}
		})
	}
}

// TestEnumerateIoctlSequence pins every ioctl an enumeration sends: each is
// a system call, each QUERYADAPTERINFO a round trip to the Windows host,
// and the hook pays them on every container start.
func TestEnumerateIoctlSequence(t *testing.T) {
	laptop := mustProfile(t, "nvidia-laptop")
	const dir = `C:\Windows\System32\DriverStore\FileRepository\`
	long := laptop[0]
	long.DriverStorePath = dir + strings.Repeat("x", 300) // past the first request's 259 characters
	longer := dir + strings.Repeat("y", 400)
	regFor := func(path string) string { return fmt.Sprintf("q48/%d", 552+2*(len(path)+1)) }
	const ids, reg = "q31/28", "q48/1072" // PHYSICALADAPTERDEVICEIDS, QUERYREGISTRY with room for 260 units
	tests := []struct {
		name     string
		adapters []simhost.Adapter
		override map[uint32]func([]byte) error // adapter 0's
		kernel   func(*fakeKernel)
		opt      Options
		want     []string
		wantErr  string
		wantPath string // adapter 0's driver store path, when not the profile's
		wantOpen int    // handles left for the close of the fd
	}{
		{name: "handles closed (long-lived callers)", adapters: laptop,
			want: []string{"e3fill/64", ids, reg, ids, reg, "close", "close"}},
		{name: "handles left to the fd (the hook)", adapters: laptop, opt: Options{CloseHandlesWithFD: true},
			want: []string{"e3fill/64", ids, reg, ids, reg}, wantOpen: 2},
		{name: "details", adapters: laptop[:1], opt: Options{Details: true},
			want: []string{"e3fill/64", "q13/4", "q15/4", ids, reg, "q65/8192", "close"}},
		{name: "kernel without ENUMADAPTERS3", adapters: laptop, kernel: func(k *fakeKernel) { k.no3 = unix.ENOTTY },
			opt:  Options{CloseHandlesWithFD: true},
			want: []string{"e3fill/64", "e2count", "e2fill/2", ids, reg, ids, reg}, wantOpen: 2},
		{name: "path longer than the first request", adapters: []simhost.Adapter{long},
			want:     []string{"e3fill/64", ids, reg, regFor(long.DriverStorePath), "close"},
			wantPath: long.DriverStorePath},
		{name: "path growing between requests", adapters: []simhost.Adapter{long},
			override: map[uint32]func([]byte) error{qaiQueryRegistry: growingRegistry(long.DriverStorePath, longer)},
			want:     []string{"e3fill/64", ids, reg, regFor(long.DriverStorePath), regFor(longer), "close"},
			wantPath: longer},
		{name: "no adapters", want: []string{"e3fill/64"},
			wantErr: "no GPU adapters: the Windows host exposes none to WSL: install or update the Windows GPU driver, then run wsl --shutdown"},
		{name: "bad count, handles left to the fd", adapters: laptop, opt: Options{CloseHandlesWithFD: true},
			kernel:  func(k *fakeKernel) { k.overCount3 = true },
			want:    []string{"e3fill/64"},
			wantErr: "LX_DXENUMADAPTERS3: kernel reported 65 adapters for a capacity of 64", wantOpen: 2},
		{name: "every adapter skipped, handles left to the fd", adapters: laptop[:1], opt: Options{CloseHandlesWithFD: true},
			override: map[uint32]func([]byte) error{qaiPhysicalAdapterDevIDs: nil},
			want:     []string{"e3fill/64", ids},
			wantErr:  "no usable GPU adapters: all 1 failed their queries, first adapter 0 (LUID 0x1a1d77): query PHYSICALADAPTERDEVICEIDS: invalid argument: install or update the Windows GPU driver, then run wsl --shutdown",
			wantOpen: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var fakes []fakeAdapter
			for i, a := range tt.adapters {
				var o map[uint32]func([]byte) error
				if i == 0 {
					o = tt.override
				}
				fakes = append(fakes, profileAdapter(a, o))
			}
			k := newFakeKernel(t, fakes...)
			if tt.kernel != nil {
				tt.kernel(k)
			}
			e, err := enumerateWith(k, tt.opt)
			if !reflect.DeepEqual(k.ioctls, tt.want) {
				t.Errorf("ioctls (%d):\n got %q\nwant %q", len(k.ioctls), k.ioctls, tt.want)
			}
			if len(k.open) != tt.wantOpen {
				t.Errorf("%d handles open after enumerate, want %d", len(k.open), tt.wantOpen)
			}
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("err = %v\nwant  %s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := tt.adapters[0].DriverStorePath
			if tt.wantPath != "" {
				want = tt.wantPath
			}
			if len(e.Adapters) != len(tt.adapters) || e.Adapters[0].DriverStorePath != want {
				t.Errorf("adapters = %+v, want %d with path %q first", e.Adapters, len(tt.adapters), want)
			}
		})
	}
}

func TestEnumerateAdapters2RetriesOnOverflow(t *testing.T) {
	gpu := mustProfile(t, "amd-desktop")[0]
	tests := []struct {
		name      string
		arrivals  int
		wantCalls []string
		wantErr   string
		wantN     int
	}{
		{"one arrival", 1, []string{"enum3 unknown", "enum2 count", "enum2 fill cap=1", "enum2 count", "enum2 fill cap=2"}, "", 2},
		{"never settles", 10, []string{"enum3 unknown",
			"enum2 count", "enum2 fill cap=1", "enum2 count", "enum2 fill cap=2",
			"enum2 count", "enum2 fill cap=3", "enum2 count", "enum2 fill cap=4"},
			"LX_DXENUMADAPTERS2: adapter count still changing after 4 attempts: value too large for defined data type", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := newFakeKernel(t, profileAdapter(gpu, nil))
			k.no3 = unix.ENOTTY
			k.arriveOnFill2 = tt.arrivals
			e, err := enumerate(k)
			if k.finished(tt.wantCalls, err, tt.wantErr) {
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(e.Adapters) != tt.wantN {
				t.Errorf("got %d adapters, want %d", len(e.Adapters), tt.wantN)
			}
		})
	}
}

func TestEnumerateUnsupported(t *testing.T) {
	k := newFakeKernel(t)
	k.no3, k.no2 = unix.ENOTTY, unix.ENOTTY
	_, err := enumerate(k)
	if !errors.Is(err, ErrUnsupported) || !errors.Is(err, unix.ENOTTY) {
		t.Fatalf("err = %v, want ErrUnsupported wrapping ENOTTY", err)
	}
	const want = "inappropriate ioctl for device: the WSL kernel does not know the dxg adapter ioctls: update WSL (wsl --update)"
	if err.Error() != want {
		t.Errorf("err = %q, want %q", err, want)
	}
}

func TestEnumerateSkipsAdaptersThatFail(t *testing.T) {
	laptop := mustProfile(t, "nvidia-laptop")
	fail := func(err error) func([]byte) error { return func([]byte) error { return err } }
	registryStatus := func(status uint32) func([]byte) error {
		return func(b []byte) error { binary.LittleEndian.PutUint32(b[540:], status); return nil }
	}
	tests := []struct {
		name     string
		override map[uint32]func([]byte) error
		wantErr  string
	}{
		{"driver version", map[uint32]func([]byte) error{qaiDriverVersion: nil},
			"adapter 0 (LUID 0x1a1d77): query DRIVERVERSION: invalid argument"},
		{"driver version as old-driver NTSTATUS", map[uint32]func([]byte) error{qaiDriverVersion: fail(ntStatus(0xC00000BB))},
			"adapter 0 (LUID 0x1a1d77): query DRIVERVERSION: NTSTATUS 0xC00000BB (STATUS_NOT_SUPPORTED)"},
		{"both adapter type queries", map[uint32]func([]byte) error{qaiAdapterType: fail(unix.EPERM), qaiAdapterTypeRender: nil},
			"adapter 0 (LUID 0x1a1d77): query ADAPTERTYPE: operation not permitted (ADAPTERTYPE_RENDER: invalid argument)"},
		{"device ids", map[uint32]func([]byte) error{qaiPhysicalAdapterDevIDs: fail(unix.ENODEV)},
			"adapter 0 (LUID 0x1a1d77): query PHYSICALADAPTERDEVICEIDS: no such device"},
		{"registry ioctl", map[uint32]func([]byte) error{qaiQueryRegistry: fail(unix.ENOENT)},
			"adapter 0 (LUID 0x1a1d77): query driver store path: QUERYREGISTRY: no such file or directory"},
		{"registry status FAIL", map[uint32]func([]byte) error{qaiQueryRegistry: registryStatus(regStatusFail)},
			"adapter 0 (LUID 0x1a1d77): query driver store path: QUERYREGISTRY: the host could not read the driver store path"},
		{"registry overflow forever", map[uint32]func([]byte) error{qaiQueryRegistry: func(b []byte) error {
			binary.LittleEndian.PutUint32(b[536:], uint32(len(b))) // always wants more than it got
			binary.LittleEndian.PutUint32(b[540:], regStatusBufferOverflow)
			return nil
		}}, "adapter 0 (LUID 0x1a1d77): query driver store path: QUERYREGISTRY: still BUFFER_OVERFLOW after 3 attempts"},
		{"registry empty path", map[uint32]func([]byte) error{qaiQueryRegistry: registryStatus(regStatusSuccess)},
			"adapter 0 (LUID 0x1a1d77): query driver store path: QUERYREGISTRY: the host returned an empty path"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := newFakeKernel(t, profileAdapter(laptop[0], tt.override), profileAdapter(laptop[1], nil))
			e, err := enumerate(k)
			k.checkClosed()
			if err != nil {
				t.Fatal(err)
			}
			if len(e.Skipped) != 1 || e.Skipped[0].Error() != tt.wantErr {
				t.Fatalf("Skipped = %v, want [%s]", e.Skipped, tt.wantErr)
			}
			if s := e.Skipped[0]; s.Index != 0 || s.LUID != (LUID{Low: 0x1a1d77}) {
				t.Errorf("skipped = index %d LUID %v", s.Index, s.LUID)
			}
			// The other adapter keeps its host index.
			if len(e.Adapters) != 1 || e.Adapters[0] != wantAdapter(1, laptop[1]) {
				t.Errorf("adapters = %+v", e.Adapters)
			}
		})
	}
}

func TestEnumerateOptionalAndFallbackQueries(t *testing.T) {
	gpu := mustProfile(t, "amd-desktop")[0]
	tests := []struct {
		name     string
		override map[uint32]func([]byte) error
		want     func(Adapter) Adapter
	}{
		{"no description", map[uint32]func([]byte) error{qaiDriverDescription: nil},
			func(a Adapter) Adapter { a.Description = ""; return a }},
		{"ADAPTERTYPE_RENDER only", map[uint32]func([]byte) error{qaiAdapterType: nil},
			func(a Adapter) Adapter { return a }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := newFakeKernel(t, profileAdapter(gpu, tt.override))
			e, err := enumerate(k)
			k.checkClosed()
			if err != nil {
				t.Fatal(err)
			}
			if want := tt.want(wantAdapter(0, gpu)); len(e.Adapters) != 1 || e.Adapters[0] != want {
				t.Errorf("adapters = %+v, want %+v", e.Adapters, want)
			}
		})
	}
}

func TestEnumerateAllSkipped(t *testing.T) {
	laptop := mustProfile(t, "nvidia-laptop")
	broken := map[uint32]func([]byte) error{qaiDriverVersion: nil}
	k := newFakeKernel(t, profileAdapter(laptop[0], broken), profileAdapter(laptop[1], broken))
	e, err := enumerate(k)
	k.checkClosed()
	if !errors.Is(err, ErrNoAdapters) || !errors.Is(err, unix.EINVAL) {
		t.Fatalf("err = %v, want ErrNoAdapters wrapping the causes", err)
	}
	const want = "no usable GPU adapters: all 2 failed their queries, first adapter 0 (LUID 0x1a1d77): query DRIVERVERSION: invalid argument: install or update the Windows GPU driver, then run wsl --shutdown"
	if err.Error() != want {
		t.Errorf("err = %q\nwant  %q", err, want)
	}
	if e == nil || len(e.Skipped) != 2 || len(e.Adapters) != 0 {
		t.Fatalf("enumeration = %+v, want both adapters in Skipped", e)
	}
}

func TestEnumerateNoAdapters(t *testing.T) {
	tests := []struct {
		name string
		k    func(*fakeKernel)
	}{
		{"ENUMADAPTERS3", func(*fakeKernel) {}},
		{"ENUMADAPTERS2", func(k *fakeKernel) { k.no3 = unix.ENOTTY }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := newFakeKernel(t)
			tt.k(k)
			e, err := enumerate(k)
			if e != nil || !errors.Is(err, ErrNoAdapters) {
				t.Fatalf("enumerate = %v, %v", e, err)
			}
			const want = "no GPU adapters: the Windows host exposes none to WSL: install or update the Windows GPU driver, then run wsl --shutdown"
			if err.Error() != want {
				t.Errorf("err = %q, want %q", err, want)
			}
		})
	}
}

func TestEnumerateComputeOnlyFilteredOut(t *testing.T) {
	// A kernel that counts the compute-only adapter but, ignoring the
	// filter, returns none: the count is only an upper bound.
	a100 := mustProfile(t, "compute-only")[0]
	k := newFakeKernel(t, profileAdapter(a100, nil))
	k.no3 = unix.ENOTTY // ENUMADAPTERS2 skips compute-only adapters
	_, err := enumerate(k)
	if !errors.Is(err, ErrNoAdapters) {
		t.Fatalf("err = %v, want ErrNoAdapters", err)
	}
}

func TestEnumerateClosesHandlesOnBadCount(t *testing.T) {
	gpu := mustProfile(t, "amd-desktop")[0]
	k := newFakeKernel(t, profileAdapter(gpu, nil))
	k.overCount3 = true
	_, err := enumerate(k)
	k.checkClosed()
	if err == nil || err.Error() != "LX_DXENUMADAPTERS3: kernel reported 65 adapters for a capacity of 64" {
		t.Fatalf("err = %v", err)
	}
}

// countingKernel counts QUERYADAPTERINFO calls by query type.
type countingKernel struct {
	*fakeKernel
	queries map[uint32]int
}

func (k countingKernel) queryAdapterInfo(handle, typ uint32, data []byte) error {
	k.queries[typ]++
	return k.fakeKernel.queryAdapterInfo(handle, typ, data)
}

// Without Details a container start asks each adapter only its PCI ids and
// driver store path: every other query is a host round trip it does not use.
func TestEnumerateWithoutDetails(t *testing.T) {
	adapters := mustProfile(t, "nvidia-laptop")
	tests := []struct {
		name    string
		opt     Options
		queries map[uint32]int // per adapter
		want    func(i int, a simhost.Adapter) Adapter
	}{
		{
			name:    "details",
			opt:     Options{Details: true},
			queries: map[uint32]int{qaiDriverVersion: 1, qaiAdapterType: 1, qaiPhysicalAdapterDevIDs: 1, qaiQueryRegistry: 1, qaiDriverDescription: 1},
			want:    wantAdapter,
		},
		{
			name:    "no details",
			queries: map[uint32]int{qaiPhysicalAdapterDevIDs: 1, qaiQueryRegistry: 1},
			want: func(i int, a simhost.Adapter) Adapter {
				w := wantAdapter(i, a)
				w.WDDMVersion, w.Type, w.Description = 0, 0, ""
				return w
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var fakes []fakeAdapter
			var want []Adapter
			for i, a := range adapters {
				fakes = append(fakes, profileAdapter(a, nil))
				want = append(want, tt.want(i, a))
			}
			k := countingKernel{newFakeKernel(t, fakes...), map[uint32]int{}}
			e, err := enumerateWith(k, tt.opt)
			k.checkClosed()
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(e.Adapters, want) {
				t.Errorf("adapters:\n got %+v\nwant %+v", e.Adapters, want)
			}
			wantQueries := map[uint32]int{}
			for typ, n := range tt.queries {
				wantQueries[typ] = n * len(adapters)
			}
			if !reflect.DeepEqual(k.queries, wantQueries) {
				t.Errorf("queries by type = %v, want %v", k.queries, wantQueries)
			}
		})
	}
}

// TestEnumerateKnown: a caller that recognises the LUIDs gets no query
// sent to the host, and one that does not gets the whole enumeration.
func TestEnumerateKnown(t *testing.T) {
	adapters := mustProfile(t, "nvidia-laptop")
	for _, known := range []bool{true, false} {
		t.Run(fmt.Sprint("known=", known), func(t *testing.T) {
			var fakes []fakeAdapter
			var wantLUIDs []LUID
			for _, a := range adapters {
				f := profileAdapter(a, nil)
				fakes = append(fakes, f)
				wantLUIDs = append(wantLUIDs, f.luid)
			}
			k := countingKernel{newFakeKernel(t, fakes...), map[uint32]int{}}
			var shown []LUID
			e, err := enumerateWith(k, Options{Known: func(l []LUID) bool { shown = l; return known }})
			k.checkClosed()
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(shown, wantLUIDs) {
				t.Errorf("Known was shown %v, want %v", shown, wantLUIDs)
			}
			if e.Listed != known {
				t.Errorf("Listed = %v, want %v", e.Listed, known)
			}
			if len(e.Adapters) != len(adapters) {
				t.Fatalf("%d adapters, want %d", len(e.Adapters), len(adapters))
			}
			if known {
				if len(k.queries) != 0 {
					t.Errorf("queries sent for known adapters: %v", k.queries)
				}
				for i, a := range e.Adapters {
					if want := (Adapter{Index: i, LUID: wantLUIDs[i]}); a != want {
						t.Errorf("adapter %d = %+v, want %+v", i, a, want)
					}
				}
			} else if k.queries[qaiQueryRegistry] != len(adapters) {
				t.Errorf("QUERYREGISTRY sent %d times, want %d", k.queries[qaiQueryRegistry], len(adapters))
			}
		})
	}
}

// Resources asks the driver version and the memory sizes; a host that
// answers neither keeps the adapter, with both left 0.
func TestEnumerateResources(t *testing.T) {
	gpu := mustProfile(t, "nvidia-laptop")[1]
	tests := []struct {
		name     string
		override map[uint32]func([]byte) error
		want     func(Adapter) Adapter
	}{
		{"answered", nil, func(a Adapter) Adapter {
			a.DriverVersion = 32<<48 | 15<<16 | 6094
			a.Memory = Memory{DedicatedVideo: 6 << 30, SharedSystem: 8 << 30}
			return a
		}},
		{"not answered", map[uint32]func([]byte) error{qaiUMDDriverVersion: nil, qaiGetSegmentSize: nil},
			func(a Adapter) Adapter { return a }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := newFakeKernel(t, profileAdapter(gpu, tt.override))
			e, err := enumerateWith(k, Options{Details: true, Resources: true})
			k.checkClosed()
			if err != nil {
				t.Fatal(err)
			}
			if want := tt.want(wantAdapter(0, gpu)); len(e.Adapters) != 1 || e.Adapters[0] != want {
				t.Errorf("adapters = %+v, want %+v", e.Adapters, want)
			}
		})
	}
	if got := DriverVersion(32<<48 | 15<<16 | 6094).String(); got != "32.0.15.6094" {
		t.Errorf("DriverVersion.String() = %q", got)
	}
	if got := DriverVersion(0).String(); got != "" {
		t.Errorf("DriverVersion(0).String() = %q, want empty", got)
	}
}

// enumerate lists and queries the adapters with every detail.
func enumerate(d adapterIoctls) (*Enumeration, error) {
	return enumerateWith(d, Options{Details: true})
}
