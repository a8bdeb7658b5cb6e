package dxcore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf16"

	"golang.org/x/sys/unix"
)

// utf16le encodes s as the host does: little-endian UTF-16, no terminator.
func utf16le(s string) []byte {
	units := utf16.Encode([]rune(s))
	b := make([]byte, 2*len(units))
	for i, u := range units {
		binary.LittleEndian.PutUint16(b[2*i:], u)
	}
	return b
}

func TestDecodeUTF16(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		want string
	}{
		{"empty", nil, ""},
		{"no NUL", utf16le(`C:\Windows`), `C:\Windows`},
		{"NUL terminated", append(utf16le(`\SystemRoot`), 0, 0), `\SystemRoot`},
		{"garbage after NUL", append(append(utf16le("ab"), 0, 0), utf16le("junk")...), "ab"},
		{"leading NUL", append([]byte{0, 0}, utf16le("x")...), ""},
		{"odd byte count drops the half unit", append(utf16le("abc"), 'd'), "abc"},
		{"single byte", []byte{'a'}, ""},
		{"non-ASCII BMP", utf16le("Größe ü"), "Größe ü"},
		{"surrogate pair", utf16le("GPU \U0001F680"), "GPU \U0001F680"},
		{"unpaired high surrogate", []byte{0x3d, 0xd8, 'a', 0}, "\uFFFDa"},
		{"unpaired low surrogate", []byte{0x80, 0xde}, "\uFFFD"},
		{"NUL byte inside a unit is not a terminator", []byte{0x00, 0x4e}, "\u4e00"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := decodeUTF16(tt.in); got != tt.want {
				t.Errorf("decodeUTF16(% x) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

// registryReply builds what the host writes back into a QUERYREGISTRY
// buffer of 552+room bytes.
func registryReply(room int, status, size uint32, value []byte) []byte {
	b := newRegistryRequest(uint32(room))
	binary.LittleEndian.PutUint32(b[536:], size)
	binary.LittleEndian.PutUint32(b[540:], status)
	copy(b[544:], value)
	return b
}

func TestDecodeRegistry(t *testing.T) {
	const store = `\SystemRoot\System32\DriverStore\FileRepository\nv_dispi.inf_amd64_0123`
	path := append(utf16le(store), 0, 0)
	need := uint32(len(path))
	tests := []struct {
		name     string
		reply    []byte
		want     string
		wantNeed uint32
		wantErr  string
	}{
		{"overflow asks for the size", registryReply(0, 1, need, nil), "", need, ""},
		{"success after overflow", registryReply(int(need), 0, need, path), store, 0, ""},
		{"success with unterminated value", registryReply(int(need), 0, need-2, path[:need-2]), store, 0, ""},
		{"success with a value shorter than the buffer", registryReply(int(need)+40, 0, need, path), store, 0, ""},
		{"success fits the 8-byte union", registryReply(0, 0, 6, utf16le("C:\\")), "C:\\", 0, ""},
		{"success with empty value", registryReply(0, 0, 0, nil), "", 0, ""},
		{"size field bounds the value", registryReply(int(need), 0, 4, path), `\S`, 0, ""},
		{"fail", registryReply(0, 2, 0, nil), "", 0, "the host could not read the driver store path"},
		{"unknown status", registryReply(0, 7, 0, nil), "", 0, "registry reply has unknown status 7"},
		{"overflow with zero size", registryReply(0, 1, 0, nil), "", 0, "registry reply asks for a 0-byte buffer"},
		{"overflow with absurd size", registryReply(0, 1, 1<<20, nil), "", 0, "registry reply asks for a 1048576-byte buffer"},
		{"overflow at the kernel limit", registryReply(0, 1, 128<<10-552, nil), "", 128<<10 - 552, ""},
		{"overflow just past the kernel limit", registryReply(0, 1, 128<<10-551, nil), "", 0, "registry reply asks for a 130521-byte buffer"},
		{"success claiming more than the buffer", registryReply(0, 0, 200, nil), "", 0, "registry reply claims 200 bytes of value in a 8-byte buffer"},
		{"short reply", make([]byte, 543), "", 0, "registry reply is 543 bytes, want at least 544"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, gotNeed, err := decodeRegistry(tt.reply)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if got != tt.want || gotNeed != tt.wantNeed {
				t.Errorf("got (%q, %d), want (%q, %d)", got, gotNeed, tt.want, tt.wantNeed)
			}
		})
	}
}

func TestDecodeDeviceIDs(t *testing.T) {
	reply := newDeviceIDsRequest()
	for i, v := range []uint32{0, 0x10de, 0x2520, 0x17aa, 0x3a5c, 0xa1, 5} {
		binary.LittleEndian.PutUint32(reply[4*i:], v)
	}
	got, err := decodeDeviceIDs(reply)
	if err != nil {
		t.Fatal(err)
	}
	want := PCIIDs{Vendor: 0x10de, Device: 0x2520, SubVendor: 0x17aa, SubSystem: 0x3a5c, Revision: 0xa1}
	if got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if _, err := decodeDeviceIDs(reply[:27]); err == nil || err.Error() != "device ids reply is 27 bytes, want 28" {
		t.Errorf("short reply: err = %v", err)
	}
}

func TestIoctlResult(t *testing.T) {
	tests := []struct {
		name    string
		r1      uintptr
		errno   unix.Errno
		wantErr string
		wantIs  error
	}{
		{"success", 0, 0, "", nil},
		{"positive NTSTATUS is success (STATUS_PENDING)", 0x103, 0, "", nil},
		{"errno wins", 0, unix.EINVAL, "invalid argument", unix.EINVAL},
		{"errno with a garbage result", ^uintptr(0), unix.ENOTTY, "inappropriate ioctl for device", unix.ENOTTY},
		{"raw INVALID_PARAMETER", uintptr(0xFFFFFFFFC000000D), 0, "NTSTATUS 0xC000000D (STATUS_INVALID_PARAMETER)", unix.EINVAL},
		{"raw INVALID_PARAMETER without sign extension", 0xC000000D, 0, "NTSTATUS 0xC000000D (STATUS_INVALID_PARAMETER)", unix.EINVAL},
		{"raw BUFFER_TOO_SMALL", 0xC0000023, 0, "NTSTATUS 0xC0000023 (STATUS_BUFFER_TOO_SMALL)", unix.EOVERFLOW},
		{"raw NOT_SUPPORTED", 0xC00000BB, 0, "NTSTATUS 0xC00000BB (STATUS_NOT_SUPPORTED)", unix.EPERM},
		{"raw unknown status maps to EINVAL", 0xC0001234, 0, "NTSTATUS 0xC0001234", unix.EINVAL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ioctlResult(tt.r1, tt.errno)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("err = %v, want nil", err)
				}
				return
			}
			if err == nil || err.Error() != tt.wantErr {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
			if !errors.Is(err, tt.wantIs) {
				t.Errorf("errors.Is(%v, %v) = false", err, tt.wantIs)
			}
			if strings.HasPrefix(tt.wantErr, "NTSTATUS") && errors.Is(err, unix.ENOTTY) {
				t.Errorf("%v matches ENOTTY", err)
			}
		})
	}
}

// TestNTStatusErrno pins every raw status an old driver can return to the
// errno a current kernel's ntstatus2int gives for it (drivers/hv/dxgkrnl/
// dxgvmbus.c, values from misc.h), so callers match both with one errors.Is.
func TestNTStatusErrno(t *testing.T) {
	tests := []struct {
		status uint32
		name   string
		errno  unix.Errno
	}{
		{0xC0000002, "STATUS_NOT_IMPLEMENTED", unix.EPERM},
		{0xC0000008, "STATUS_INVALID_HANDLE", unix.EBADF},
		{0xC000000D, "STATUS_INVALID_PARAMETER", unix.EINVAL},
		{0xC0000017, "STATUS_NO_MEMORY", unix.ENOMEM},
		{0xC000001D, "STATUS_ILLEGAL_INSTRUCTION", unix.EOPNOTSUPP},
		{0xC0000022, "STATUS_ACCESS_DENIED", unix.EACCES},
		{0xC0000023, "STATUS_BUFFER_TOO_SMALL", unix.EOVERFLOW},
		{0xC0000024, "STATUS_OBJECT_TYPE_MISMATCH", unix.EPROTOTYPE},
		{0xC0000033, "STATUS_OBJECT_NAME_INVALID", unix.ENOENT},
		{0xC0000034, "STATUS_OBJECT_NAME_NOT_FOUND", unix.ENOENT},
		{0xC0000035, "STATUS_OBJECT_NAME_COLLISION", unix.EEXIST},
		{0xC00000BB, "STATUS_NOT_SUPPORTED", unix.EPERM},
		// Not in ntstatus2int: the kernel's default, EINVAL, not ENOENT.
		{0xC0000225, "STATUS_NOT_FOUND", unix.EINVAL},
		{0xC00002B6, "STATUS_DEVICE_REMOVED", unix.ENODEV},
		{0xC01E0102, "STATUS_GRAPHICS_ALLOCATION_BUSY", unix.EINPROGRESS},
		{0xC0000001, "", unix.EINVAL}, // STATUS_UNSUCCESSFUL: default
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%#x", tt.status), func(t *testing.T) {
			err := ioctlResult(uintptr(tt.status), 0)
			want := fmt.Sprintf("NTSTATUS 0x%08X", tt.status)
			if tt.name != "" {
				want += " (" + tt.name + ")"
			}
			if err == nil || err.Error() != want {
				t.Fatalf("err = %v, want %q", err, want)
			}
			if !errors.Is(err, tt.errno) {
				t.Errorf("errors.Is(%v, %v) = false", err, tt.errno)
			}
			for _, other := range []unix.Errno{unix.EINVAL, unix.ENOENT, unix.EPERM, unix.ENOMEM, unix.EEXIST, unix.EOPNOTSUPP} {
				if other != tt.errno && errors.Is(err, other) {
					t.Errorf("%v also matches %v", err, other)
				}
			}
		})
	}
	// STATUS_TIMEOUT is a success code: the kernel returns it as a positive
	// result, which is no failure.
	if err := ioctlResult(0x102, 0); err != nil {
		t.Errorf("STATUS_TIMEOUT result: %v, want success", err)
	}
}
