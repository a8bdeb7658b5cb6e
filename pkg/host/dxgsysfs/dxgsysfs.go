package dxgsysfs

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"

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
	// Stamp is every entry of both directories, name and inode, in the
	// order the directories list them (sysfs lists a set of entries in
	// the same order every time; another order is only a miss): equal
	// stamps mean the same devices are bound.
	Stamp string
	// Channels are the LUIDs the VM-bus directory's GUID-named entries
	// give (dxcore.LUID.Uint64's form), in listing order.
	Channels []uint64
}

// Read lists the driver directories under the sysfs root. A missing
// directory (no dxgkrnl, not WSL) is an error errors.Is(err,
// fs.ErrNotExist) reports.
//
// It runs on every warm container start, in a fresh process where each
// new heap size class and each new page of code is a page fault: it builds
// the stamp in one buffer straight from the getdents records, with no
// per-entry allocation, no sorting and no string conversions.
func Read(root string) (Reading, error) {
	var r Reading
	// Both on the stack: a driver directory lists a few attribute files and
	// a device or two per adapter, some 50 bytes each.
	var buf [1024]byte
	var st [512]byte
	stamp := st[:0]
	for i, dir := range Dirs {
		stamp = append(stamp, byte('0'+i), '\n')
		var err error
		if stamp, r.Channels, err = list(root+"/"+dir, buf[:], stamp, r.Channels, i == 0); err != nil {
			return Reading{}, err
		}
	}
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
		if !slices.Contains(r.Channels, l) {
			return false
		}
	}
	return true
}

// channelLUID is the LUID a VM-bus device name gives, when it is an
// instance GUID as the kernel prints it ("%pUl": the first three fields
// are the little-endian words of bytes 0-3, 4-5 and 6-7), so the LUID's
// low part is the first field and its high part the next two.
func channelLUID(name []byte) (uint64, bool) {
	if len(name) != 36 || name[8] != '-' || name[13] != '-' || name[18] != '-' || name[23] != '-' {
		return 0, false
	}
	low, ok1 := hex(name[0:8])
	mid, ok2 := hex(name[9:13])
	high, ok3 := hex(name[14:18])
	_, ok4 := hex(name[19:23])
	_, ok5 := hex(name[24:36])
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 {
		return 0, false
	}
	return (high<<16|mid)<<32 | low, true
}

// hex parses up to 16 hex digits.
func hex(b []byte) (uint64, bool) {
	var v uint64
	for _, c := range b {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		v = v<<4 | uint64(c)
	}
	return v, true
}

// list appends a directory's entries but "." and ".." to stamp, a line
// "name inode" each, and with channels their LUIDs to luids.
func list(dir string, buf, stamp []byte, luids []uint64, channels bool) ([]byte, []uint64, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	defer unix.Close(fd)
	entries := 0
	for {
		n, err := unix.Getdents(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, nil, &os.PathError{Op: "getdents", Path: dir, Err: err}
		}
		if n == 0 {
			return stamp, luids, nil
		}
		for b := buf[:n]; len(b) > 0; {
			var name []byte
			var ino uint64
			if name, ino, b, err = next(b); err != nil {
				return nil, nil, fmt.Errorf("%s: %w", dir, err)
			}
			if len(name) == 1 && name[0] == '.' || len(name) == 2 && name[0] == '.' && name[1] == '.' {
				continue
			}
			entries++
			stamp = append(stamp, name...)
			stamp = append(stamp, ' ')
			stamp = strconv.AppendUint(stamp, ino, 10)
			stamp = append(stamp, '\n')
			if l, ok := channelLUID(name); ok && channels {
				luids = append(luids, l)
			}
		}
		if entries > maxEntries {
			return nil, nil, fmt.Errorf("%s: more than %d entries", dir, maxEntries)
		}
	}
}

var errBadRecord = errors.New("malformed directory record")

// next splits the first linux_dirent64 record off b (ino u64, off s64,
// reclen u16, type u8, name NUL-terminated).
func next(b []byte) (name []byte, ino uint64, rest []byte, err error) {
	const header = 19
	if len(b) < header {
		return nil, 0, nil, errBadRecord
	}
	reclen := int(binary.NativeEndian.Uint16(b[16:18]))
	if reclen < header+1 || reclen > len(b) {
		return nil, 0, nil, errBadRecord
	}
	name = b[header:reclen]
	end := bytes.IndexByte(name, 0)
	if end < 0 {
		return nil, 0, nil, errBadRecord
	}
	return name[:end], binary.NativeEndian.Uint64(b[0:8]), b[reclen:], nil
}
