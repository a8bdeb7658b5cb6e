package dxgsysfs

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Dirs are the driver directories a reading lists, relative to the sysfs
// root: the VM-bus one first (its names give the LUIDs), then the PCI one.
var Dirs = [2]string{"bus/vmbus/drivers/dxgkrnl", "bus/pci/drivers/dxgkrnl"}

// maxEntries bounds one directory's listing: a driver directory holds a
// few attribute files and one entry per bound device (64 adapters at most).
const maxEntries = 1024

// Reading is what the driver directories listed once.
type Reading struct {
	// Stamp is every entry of both directories, name and inode, in a
	// fixed order: equal stamps mean the same devices are bound.
	Stamp string
	// Channels are the LUIDs the VM-bus directory's GUID-named entries
	// give (dxcore.LUID.Uint64's form), sorted.
	Channels []uint64
}

// Read lists the driver directories under the sysfs root. A missing
// directory (no dxgkrnl, not WSL) is an error errors.Is(err,
// fs.ErrNotExist) reports.
func Read(root string) (Reading, error) {
	var r Reading
	var stamp []byte
	for i, dir := range Dirs {
		p := filepath.Join(root, dir)
		entries, err := list(p)
		if err != nil {
			return Reading{}, err
		}
		slices.SortFunc(entries, func(a, b entry) int { return strings.Compare(a.name, b.name) })
		stamp = strconv.AppendInt(stamp, int64(i), 10)
		stamp = append(stamp, '\n')
		for _, e := range entries {
			stamp = append(stamp, e.name...)
			stamp = append(stamp, ' ')
			stamp = strconv.AppendUint(stamp, e.ino, 10)
			stamp = append(stamp, '\n')
			if i == 0 {
				if l, ok := ChannelLUID(e.name); ok {
					r.Channels = append(r.Channels, l)
				}
			}
		}
	}
	slices.Sort(r.Channels)
	r.Stamp = string(stamp)
	return r, nil
}

// Covers reports whether every LUID in luids is one of the reading's
// channels: the reading then lists each adapter an enumeration made at
// the same time found, and a later equal Stamp means the same adapters.
func (r Reading) Covers(luids []uint64) bool {
	if len(luids) == 0 {
		return false
	}
	for _, l := range luids {
		if _, ok := slices.BinarySearch(r.Channels, l); !ok {
			return false
		}
	}
	return true
}

// ChannelLUID is the LUID a VM-bus device name gives, when it is an
// instance GUID as the kernel prints it ("%pUl": the first three fields
// are the little-endian words of bytes 0-3, 4-5 and 6-7), so the LUID's
// low part is the first field and its high part the next two.
func ChannelLUID(name string) (uint64, bool) {
	if len(name) != 36 || name[8] != '-' || name[13] != '-' || name[18] != '-' || name[23] != '-' {
		return 0, false
	}
	for i, c := range []byte(name) {
		if i == 8 || i == 13 || i == 18 || i == 23 {
			continue
		}
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return 0, false
		}
	}
	low, _ := strconv.ParseUint(name[0:8], 16, 32)
	mid, _ := strconv.ParseUint(name[9:13], 16, 16)
	high, _ := strconv.ParseUint(name[14:18], 16, 16)
	return (high<<16|mid)<<32 | low, true
}

// ChannelName is the VM-bus device name of an adapter's channel with the
// given LUID: the inverse of ChannelLUID for the first eight bytes, tail
// (the GUID's last eight bytes) as given. Simulated hosts use it.
func ChannelName(luid uint64, tail [8]byte) string {
	return fmt.Sprintf("%08x-%04x-%04x-%x-%x", uint32(luid), uint16(luid>>32), uint16(luid>>48), tail[:2], tail[2:])
}

type entry struct {
	name string
	ino  uint64
}

// list reads a directory's entries with getdents64, without "." and "..".
func list(dir string) ([]entry, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	defer unix.Close(fd)
	var out []entry
	buf := make([]byte, 8192)
	for {
		n, err := unix.Getdents(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "getdents", Path: dir, Err: err}
		}
		if n == 0 {
			return out, nil
		}
		if out, err = parse(buf[:n], out); err != nil {
			return nil, fmt.Errorf("%s: %w", dir, err)
		}
		if len(out) > maxEntries {
			return nil, fmt.Errorf("%s: more than %d entries", dir, maxEntries)
		}
	}
}

var errBadRecord = errors.New("malformed directory record")

// parse appends the linux_dirent64 records in b (ino u64, off s64,
// reclen u16, type u8, name NUL-terminated) to out.
func parse(b []byte, out []entry) ([]entry, error) {
	const header = 19
	for len(b) > 0 {
		if len(b) < header {
			return nil, errBadRecord
		}
		reclen := int(binary.NativeEndian.Uint16(b[16:18]))
		if reclen < header+1 || reclen > len(b) {
			return nil, errBadRecord
		}
		name := b[header:reclen]
		end := slices.Index(name, 0)
		if end < 0 {
			return nil, errBadRecord
		}
		if s := string(name[:end]); s != "." && s != ".." {
			out = append(out, entry{name: s, ino: binary.NativeEndian.Uint64(b[0:8])})
		}
		b = b[reclen:]
	}
	return out, nil
}
