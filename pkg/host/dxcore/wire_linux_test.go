package dxcore

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/simhost"
	"golang.org/x/sys/unix"
)

// wireKernel answers ioctls at the level the kernel sees them: a request
// number and the bytes of the argument, whose pointer fields are user
// addresses it follows. It decodes each argument at the offsets of
// dxg-uapi.md, written out here as literals, and hands the call to a
// fakeKernel for the semantics. The device code under test is the real
// one: encoders, pinning, pointers, decoders; only the system call is
// replaced, which lets it run where qemu-user refuses the dxg numbers.
//
// trace records every call as the kernel would see it, with each user
// pointer replaced by the length of what it points at and the bytes sent
// there hashed: the same enumeration must give the same trace on every
// architecture (testdata/wire/*.trace, written on amd64).
type wireKernel struct {
	k *fakeKernel
	// fail reports an argument no kernel would accept as the caller meant.
	fail  func(format string, args ...any)
	trace []string
}

// userBytes is the n bytes at the user pointer stored at arg[off:off+8].
func userBytes(arg []byte, off, n int) []byte {
	if binary.LittleEndian.Uint64(arg[off:]) == 0 || n == 0 {
		return nil
	}
	p := *(*unsafe.Pointer)(unsafe.Pointer(&arg[off]))
	return unsafe.Slice((*byte)(p), n)
}

// masked is arg with the 8-byte pointer at each of offs zeroed.
func masked(arg []byte, offs ...int) []byte {
	b := bytes.Clone(arg)
	for _, o := range offs {
		clear(b[o : o+8])
	}
	return b
}

func digest(b []byte) string {
	h := sha256.Sum256(b)
	return fmt.Sprintf("%d:%x", len(b), h[:6])
}

func (w *wireKernel) ioctl(req uint32, arg []byte) error {
	// _IOWR('G', nr, size): the size in the number is the argument's.
	if dir, typ, size := req>>30, req>>8&0xff, int(req>>16&0x3fff); dir != 3 || typ != 'G' || size != len(arg) {
		w.fail("ioctl %#x: dir %d type %#x size %d with a %d-byte argument", req, dir, typ, size, len(arg))
		return unix.ENOTTY
	}
	le := binary.LittleEndian
	switch req {
	case 0xC018473E: // LX_DXENUMADAPTERS3: filter u64 @0, count u32 @8, adapters @16
		infos := userBytes(arg, 16, int(le.Uint32(arg[8:]))*20)
		w.trace = append(w.trace, fmt.Sprintf("ENUMADAPTERS3 %x", masked(arg, 16)))
		n, err := w.k.enumAdapters3(le.Uint64(arg[0:]), infos)
		if err != nil {
			return err
		}
		le.PutUint32(arg[8:], n)
	case 0xC0104714: // LX_DXENUMADAPTERS2: count u32 @0, adapters @8
		infos := userBytes(arg, 8, int(le.Uint32(arg[0:]))*20)
		w.trace = append(w.trace, fmt.Sprintf("ENUMADAPTERS2 %x", masked(arg, 8)))
		n, err := w.k.enumAdapters2(infos)
		if err != nil {
			return err
		}
		le.PutUint32(arg[0:], n)
	case 0xC0184709: // LX_DXQUERYADAPTERINFO: handle @0, type @4, data @8, size @16
		data := userBytes(arg, 8, int(le.Uint32(arg[16:])))
		w.trace = append(w.trace, fmt.Sprintf("QUERYADAPTERINFO %x sent %s", masked(arg, 8), digest(data)))
		return w.k.queryAdapterInfo(le.Uint32(arg[0:]), le.Uint32(arg[4:]), data)
	case 0xC0044715: // LX_DXCLOSEADAPTER: handle @0
		w.trace = append(w.trace, fmt.Sprintf("CLOSEADAPTER %x", arg))
		return w.k.closeAdapter(le.Uint32(arg[0:]))
	default:
		w.fail("ioctl %#x is not one enumeration sends", req)
		return unix.ENOTTY
	}
	return nil
}

// TestWireEnumeration enumerates every simulated host through the real
// device code with the wire kernel, checks the adapters, and compares
// the ioctl trace with the one amd64 wrote: under qemu-user on arm64
// (make test-arm64) this is how arm64's dxg calls are checked, since qemu
// refuses the dxg ioctl numbers with ENOSYS. DXCORE_WRITE_TRACES=1 on
// amd64 rewrites the traces after a deliberate change.
func TestWireEnumeration(t *testing.T) {
	write := os.Getenv("DXCORE_WRITE_TRACES") == "1"
	if write && runtime.GOARCH != "amd64" {
		t.Fatal("DXCORE_WRITE_TRACES: the traces are amd64's: write them there")
	}
	for _, name := range simhost.Names() {
		for _, opt := range []struct {
			name string
			opt  Options
		}{
			{"details", Options{Details: true, Resources: true}},
			{"hook", Options{CloseHandlesWithFD: true}},
		} {
			t.Run(name+"/"+opt.name, func(t *testing.T) {
				p, err := simhost.Lookup(name)
				if err != nil {
					t.Fatal(err)
				}
				var fakes []fakeAdapter
				for _, a := range p.Adapters {
					fakes = append(fakes, profileAdapter(a, nil))
				}
				w := &wireKernel{k: newFakeKernel(t, fakes...), fail: t.Errorf}
				e, err := enumerateWith(device{fd: -1, sys: w.ioctl}, opt.opt)
				if len(p.Adapters) == 0 {
					if err == nil {
						t.Fatal("a host without adapters enumerated")
					}
				} else if err != nil {
					t.Fatal(err)
				} else {
					for i, a := range p.Adapters {
						got := e.Adapters[i]
						if got.LUID != (LUID{Low: a.LUIDLow, High: int32(a.LUIDHigh)}) || got.PCI.Vendor != a.VendorID || got.PCI.Device != a.DeviceID || got.DriverStorePath != a.DriverStorePath {
							t.Errorf("adapter %d = %+v, want %+v", i, got, a)
						}
						if opt.opt.Details && (got.Description != a.Description || got.Type != AdapterType(a.Flags) || got.Memory.DedicatedVideo != a.DedicatedMemory) {
							t.Errorf("adapter %d details = %+v, want %+v", i, got, a)
						}
					}
				}
				trace := strings.Join(w.trace, "\n") + "\n"
				file := filepath.Join("testdata", "wire", name+"-"+opt.name+".trace")
				if write {
					if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(file, []byte(trace), 0o644); err != nil {
						t.Fatal(err)
					}
					return
				}
				want, err := os.ReadFile(file)
				if err != nil {
					t.Fatalf("%v: run DXCORE_WRITE_TRACES=1 go test -run TestWireEnumeration ./pkg/host/dxcore on amd64", err)
				}
				if trace != string(want) {
					t.Errorf("ioctl trace on %s differs from amd64's (%s):\n got:\n%s\nwant:\n%s", runtime.GOARCH, file, trace, want)
				}
			})
		}
	}
}

// TestWireRejectsBadArguments shows the wire kernel is not a rubber stamp:
// an argument whose length disagrees with its request number, or a number
// enumeration never sends, fails.
func TestWireRejectsBadArguments(t *testing.T) {
	tests := []struct {
		name string
		req  uint32
		arg  []byte
	}{
		{"ENUMADAPTERS3 with 16 bytes", 0xC018473E, make([]byte, 16)},
		{"read-only direction", 0x8018473E, make([]byte, 24)},
		{"OPENADAPTERFROMLUID", 0xC00C4701, make([]byte, 12)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var failed []string
			w := &wireKernel{k: newFakeKernel(t), fail: func(f string, a ...any) { failed = append(failed, fmt.Sprintf(f, a...)) }}
			if err := w.ioctl(tt.req, tt.arg); err == nil || len(failed) != 1 {
				t.Errorf("ioctl = %v, failures %q; want ENOTTY and one failure", err, failed)
			}
		})
	}
}
