package dxgsysfs

import (
	"encoding/binary"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestChannelLUID: the LUID is the first eight bytes of the GUID, which
// the kernel prints as little-endian words (%pUl).
func TestChannelLUID(t *testing.T) {
	guid := func(b [16]byte) string {
		// As lib/vsprintf.c prints %pUl: bytes 3 2 1 0 - 5 4 - 7 6 - 8 9 - 10..15.
		const hex = "0123456789abcdef"
		order := []int{3, 2, 1, 0, -1, 5, 4, -1, 7, 6, -1, 8, 9, -1, 10, 11, 12, 13, 14, 15}
		var s []byte
		for _, i := range order {
			if i < 0 {
				s = append(s, '-')
				continue
			}
			s = append(s, hex[b[i]>>4], hex[b[i]&15])
		}
		return string(s)
	}
	for _, tt := range []struct {
		name string
		luid uint64
		ok   bool
	}{
		{"004486d1-0000-0000-0102-030405060708", 0x4486d1, true},
		{"0001a1d7-0001-0000-aaaa-bbbbccccdddd", 1<<32 | 0x1a1d7, true},
		{"00010b3c-5678-1234-0000-000000000000", 0x12345678<<32 | 0x10b3c, true},
		{"ABCDEF01-0000-0000-0000-000000000000", 0xabcdef01, true},
		{"0001a1d7-0001-0000-aaaa-bbbbccccddd", 0, false},  // short
		{"0001a1d7+0001-0000-aaaa-bbbbccccdddd", 0, false}, // separator
		{"0001a1dg-0001-0000-aaaa-bbbbccccdddd", 0, false}, // not hex
		{"bind", 0, false},
		{"0000:00:00.0", 0, false},
	} {
		got, ok := channelLUID([]byte(tt.name))
		if got != tt.luid || ok != tt.ok {
			t.Errorf("channelLUID(%q) = %#x, %v; want %#x, %v", tt.name, got, ok, tt.luid, tt.ok)
		}
	}
	// The kernel's own print of instance bytes whose first eight are a
	// LUID gives that LUID back.
	for _, luid := range []uint64{0x4486d1, 1<<32 | 0x1a1d7, 0xfedcba9876543210} {
		var b [16]byte
		binary.LittleEndian.PutUint64(b[:8], luid)
		copy(b[8:], "\x01\x02\x03\x04\x05\x06\x07\x08")
		name := guid(b)
		if got, ok := channelLUID([]byte(name)); !ok || got != luid {
			t.Errorf("channelLUID(%q) = %#x, %v; want %#x", name, got, ok, luid)
		}
	}
}

// TestRead: a reading lists both driver directories; any added, removed
// or renamed entry changes the stamp, and the channels are the GUID
// entries' LUIDs.
func TestRead(t *testing.T) {
	root := t.TempDir()
	vmbus, pci := filepath.Join(root, Dirs[0]), filepath.Join(root, Dirs[1])
	global := "dd0b5c2b-0000-0000-0000-000000000001" // its "LUID" is no adapter's
	nv := "004486d1-0000-0000-0100-000000000000"
	mk := func(p string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("../../../../devices/x", p); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Read(root); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Read without the driver dirs: %v, want not exist", err)
	}
	for _, p := range []string{filepath.Join(vmbus, global), filepath.Join(vmbus, nv), filepath.Join(vmbus, "bind"), filepath.Join(pci, "0001:00:00.0")} {
		mk(p)
	}
	first, err := Read(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Channels) != 2 || !slices.Contains(first.Channels, 0x4486d1) || !slices.Contains(first.Channels, 0xdd0b5c2b) {
		t.Errorf("channels %#x, want 0x4486d1 and 0xdd0b5c2b (the global channel's)", first.Channels)
	}
	if !first.Covers([]uint64{0x4486d1}) || first.Covers([]uint64{0x4486d1, 0x1a1d7}) || first.Covers(nil) {
		t.Errorf("Covers wrong for channels %#x", first.Channels)
	}
	if again, _ := Read(root); again.Stamp != first.Stamp {
		t.Errorf("two readings of the same dirs differ:\n%s\n%s", first.Stamp, again.Stamp)
	}
	changes := []struct {
		name string
		do   func() error
	}{
		{"a new adapter's channel", func() error { return os.Symlink("x", filepath.Join(vmbus, "0001a1d7-0000-0000-0000-000000000000")) }},
		{"a new adapter's PCI device", func() error { return os.Symlink("x", filepath.Join(pci, "0002:00:00.0")) }},
		{"a channel renamed (a new LUID)", func() error {
			return os.Rename(filepath.Join(vmbus, nv), filepath.Join(vmbus, "004486d2-0000-0000-0100-000000000000"))
		}},
		{"a PCI device removed", func() error { return os.Remove(filepath.Join(pci, "0001:00:00.0")) }},
	}
	seen := map[string]string{first.Stamp: "the first reading"}
	for _, c := range changes {
		if err := c.do(); err != nil {
			t.Fatal(err)
		}
		r, err := Read(root)
		if err != nil {
			t.Fatal(err)
		}
		if prev, ok := seen[r.Stamp]; ok {
			t.Errorf("after %s the stamp is the one of %s", c.name, prev)
		}
		seen[r.Stamp] = c.name
	}
}

// TestNext: records split as the kernel lays them out; records that run
// past the buffer or lack their NUL are errors, not reads past the end.
func TestNext(t *testing.T) {
	rec := func(ino uint64, name string, reclen int) []byte {
		b := make([]byte, reclen)
		binary.NativeEndian.PutUint64(b, ino)
		binary.NativeEndian.PutUint16(b[16:], uint16(reclen))
		copy(b[19:], name)
		return b
	}
	b := append(rec(7, "a", 24), rec(8, "0000:00:00.0", 32)...)
	name, ino, rest, err := next(b)
	if err != nil || string(name) != "a" || ino != 7 || len(rest) != 32 {
		t.Fatalf("next = %q, %d, %d bytes left, %v", name, ino, len(rest), err)
	}
	if name, ino, rest, err = next(rest); err != nil || string(name) != "0000:00:00.0" || ino != 8 || len(rest) != 0 {
		t.Fatalf("next = %q, %d, %d bytes left, %v", name, ino, len(rest), err)
	}
	for name, b := range map[string][]byte{
		"short header":   make([]byte, 10),
		"reclen too big": rec(1, "a", 24)[:20],
		"reclen zero":    make([]byte, 24),
		"no NUL":         func() []byte { b := rec(1, "", 24); copy(b[19:], "abcde"); return b }(),
	} {
		if _, _, _, err := next(b); err == nil {
			t.Errorf("next(%s) = nil error", name)
		}
	}
}
