package ldcache

// This file is the tests' one loader-cache oracle: Parse, Encode and Merge
// as they were before Merge learned to work on the cache in place (commit
// 29427da), renamed with a ref prefix. It shares no code with Merge's
// reader and writer, so the differential tests compare Merge with it byte
// for byte, and the other tests read what Merge wrote with refParse. It is
// itself held to glibc: TestReferenceMatchesGlibcReader and
// TestReferenceReadsHostCache against `ldconfig -p`. It has no limits
// (TestLimits covers Merge's).

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"runtime"
	"slices"
	"strings"
)

// refIsExtension is dl_cache_hwcap_extension: only the extension bit is set
// above bit 31, apart from the ISA level.
func refIsExtension(hwcap uint64) bool {
	return (hwcap>>32)&^isaLevelMask == hwcapExtension>>32
}

// refParse decodes a loader cache: the new format, the old format with the new
// one inside (what ldconfig wrote by default before glibc 2.32), or the old
// format alone. Entries come back in file order, which is lookup order.
func refParse(data []byte) ([]Entry, error) {
	switch {
	case bytes.HasPrefix(data, []byte(magicNew)):
		return refParseNew(data, 0)
	case bytes.HasPrefix(data, []byte(magicOld)):
		if len(data) < oldHeaderSize {
			return nil, fmt.Errorf("%w: %d bytes end inside the old-format header", ErrFormat, len(data))
		}
		n := binary.LittleEndian.Uint32(data[12:])
		if uint64(n) > uint64(len(data)-oldHeaderSize)/oldEntrySize {
			return nil, fmt.Errorf("%w: %d old-format entries do not fit in %d bytes", ErrFormat, n, len(data))
		}
		// The new format hides in the old string table, 8-byte aligned
		// (ALIGN_CACHE); the loader then uses only the new part.
		end := oldHeaderSize + int(n)*oldEntrySize
		base := (end + 7) &^ 7
		if base+newHeaderSize <= len(data) && bytes.HasPrefix(data[base:], []byte(magicNew)) {
			return refParseNew(data, base)
		}
		return refParseOld(data, int(n), end)
	default:
		return nil, fmt.Errorf("%w: no %q or %q magic at the start", ErrFormat, magicNew, magicOld)
	}
}

// refCstring returns the NUL-terminated string at off in s.
func refCstring(s string, off uint64) (string, bool) {
	if off >= uint64(len(s)) {
		return "", false
	}
	end := strings.IndexByte(s[off:], 0)
	if end < 0 {
		return "", false
	}
	return s[off : off+uint64(end)], true
}

// refParseNew decodes the new format whose header starts at base. String
// offsets count from that header; extension offsets from the file start.
func refParseNew(data []byte, base int) ([]Entry, error) {
	d := data[base:]
	if len(d) < newHeaderSize {
		return nil, fmt.Errorf("%w: %d bytes end inside the header", ErrFormat, len(d))
	}
	le := binary.LittleEndian
	if f := d[offFlags]; f != 0 && f&flagsEndianMask != flagsEndianLittle {
		return nil, fmt.Errorf("%w: header flags %#x say it is not little-endian", ErrFormat, f)
	}
	n := le.Uint32(d[offNlibs:])
	if uint64(n) > uint64(len(d)-newHeaderSize)/newEntrySize {
		return nil, fmt.Errorf("%w: %d entries do not fit in %d bytes", ErrFormat, n, len(d))
	}
	// One copy of the file; every string is a substring of it.
	s := string(data)
	hwcaps := refLoadHWCaps(data, le.Uint32(d[offExtension:]))
	entries := make([]Entry, n)
	for i := range entries {
		e := d[newHeaderSize+i*newEntrySize:]
		key, value := le.Uint32(e[4:]), le.Uint32(e[8:])
		k, ok1 := refCstring(s, uint64(base)+uint64(key))
		p, ok2 := refCstring(s, uint64(base)+uint64(value))
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("%w: entry %d: string offset %d or %d outside the file or unterminated", ErrFormat, i, key, value)
		}
		hwcap := le.Uint64(e[16:])
		var sub string
		if refIsExtension(hwcap) && uint64(uint32(hwcap)) < uint64(len(hwcaps)) {
			// Name offsets count from the file start, as the loader and
			// ldconfig -p read them. (ldconfig writes them relative to the
			// new header, which differs only in old+new files; there the
			// loader already sees a wrong name and never picks the entry,
			// and so does the cache we write.)
			sub, _ = refCstring(s, uint64(hwcaps[uint32(hwcap)]))
		}
		entries[i] = Entry{
			Key:          k,
			Path:         p,
			Flags:        int32(le.Uint32(e[0:])),
			OSVersion:    le.Uint32(e[12:]),
			HWCap:        hwcap,
			HWCapsSubdir: sub,
		}
	}
	return entries, nil
}

// refLoadHWCaps returns the string offsets of the glibc-hwcaps section, nil
// when the file has none or its extension directory is malformed: like
// cache_extension_load, a bad extension costs the glibc-hwcaps entries,
// not the cache.
func refLoadHWCaps(data []byte, extOff uint32) []uint32 {
	le := binary.LittleEndian
	off := uint64(extOff)
	size := uint64(len(data))
	if off == 0 || off%4 != 0 || off+extensionHdrSize > size || le.Uint32(data[off:]) != extensionMagic {
		return nil
	}
	count := uint64(le.Uint32(data[off+4:]))
	if count > (size-off-extensionHdrSize)/extensionSecSize {
		return nil
	}
	var hw []byte
	for i := range count {
		sec := data[off+extensionHdrSize+i*extensionSecSize:]
		tag, secOff, secSize := le.Uint32(sec), uint64(le.Uint32(sec[8:])), uint64(le.Uint32(sec[12:]))
		if secOff+secSize > size {
			return nil
		}
		if tag == tagGlibcHWCaps {
			hw = data[secOff : secOff+secSize]
			if secSize == 0 || secOff%4 != 0 || secSize%4 != 0 {
				hw = nil
			}
		}
	}
	out := make([]uint32, len(hw)/4)
	for i := range out {
		out[i] = le.Uint32(hw[4*i:])
	}
	return out
}

// refParseOld decodes an old-format cache of n entries whose string table
// starts at strBase.
func refParseOld(data []byte, n, strBase int) ([]Entry, error) {
	le := binary.LittleEndian
	s := string(data)
	entries := make([]Entry, n)
	for i := range entries {
		e := data[oldHeaderSize+i*oldEntrySize:]
		key, value := le.Uint32(e[4:]), le.Uint32(e[8:])
		k, ok1 := refCstring(s, uint64(strBase)+uint64(key))
		p, ok2 := refCstring(s, uint64(strBase)+uint64(value))
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("%w: old-format entry %d: string offset %d or %d outside the file or unterminated", ErrFormat, i, key, value)
		}
		entries[i] = Entry{Key: k, Path: p, Flags: int32(le.Uint32(e[0:]))}
	}
	return entries, nil
}

// refEncode writes entries as a new-format cache, sorted the way ldconfig sorts
// and the loader's binary search expects; entries that compare equal keep
// their order, which decides which one the loader tries first. It drops
// glibc-hwcaps entries without a subdirectory name: the loader gives those
// priority 0 and never uses them. It fails only for strings with a NUL byte
// or a cache larger than 4 GiB.
func refEncode(entries []Entry) ([]byte, error) {
	if len(entries) > math.MaxInt32 {
		return nil, fmt.Errorf("%d entries are more than a cache holds", len(entries))
	}
	// Sort indices, not entries: moving 4 bytes instead of 80 makes
	// merging a few entries into a large cache several times faster.
	order := make([]int32, 0, len(entries))
	var errs []error
	for i, e := range entries {
		if strings.IndexByte(e.Key, 0) >= 0 || strings.IndexByte(e.Path, 0) >= 0 || strings.IndexByte(e.HWCapsSubdir, 0) >= 0 {
			errs = append(errs, fmt.Errorf("entry %d (%q): a NUL byte cannot be stored", i, e.Key))
			continue
		}
		if e.HWCapsSubdir == "" && refIsExtension(e.HWCap) {
			continue
		}
		order = append(order, int32(i))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	slices.SortStableFunc(order, func(i, j int32) int { return refCompare(&entries[i], &entries[j]) })
	return refLayout(entries, order)
}

// refCompare is ldconfig's order (elf/cache.c compare, the glibc 2.33-2.36
// version, whose extra tie-breakers are all zero for what later versions
// write): descending by _dl_cache_libcmp of the names, then flags, then
// glibc-hwcaps entries before the others, by subdirectory name, then the
// most specific legacy hwcap and the highest OS version first.
func refCompare(a, b *Entry) int {
	if c := refLibcmp(b.Key, a.Key); c != 0 {
		return c
	}
	if c := cmp.Compare(b.Flags, a.Flags); c != 0 {
		return c
	}
	aExt, bExt := a.HWCapsSubdir != "", b.HWCapsSubdir != ""
	if aExt != bExt {
		if aExt {
			return -1
		}
		return 1
	}
	if aExt {
		// A glibc-hwcaps entry has no legacy hwcap (ldconfig keeps 0 for it).
		if c := strings.Compare(a.HWCapsSubdir, b.HWCapsSubdir); c != 0 {
			return c
		}
	} else {
		if c := cmp.Compare(bits.OnesCount64(b.HWCap), bits.OnesCount64(a.HWCap)); c != 0 {
			return c
		}
		if c := cmp.Compare(b.HWCap, a.HWCap); c != 0 {
			return c
		}
	}
	return cmp.Compare(b.OSVersion, a.OSVersion)
}

// refLibcmp is glibc's _dl_cache_libcmp, including its C details: runs of
// digits compare as int numbers (wrapping like the C code), a digit sorts
// after any other character, and other bytes compare as C's char does on
// the machine: signed on x86_64, unsigned on aarch64 (the psABIs say so).
func refLibcmp(a, b string) int {
	char := func(c byte) int { return int(int8(c)) }
	if runtime.GOARCH == "arm64" {
		char = func(c byte) int { return int(c) }
	}
	i, j := 0, 0
	for i < len(a) {
		ca, cb := a[i], refAt(b, j)
		switch {
		case refIsDigit(ca) && refIsDigit(cb):
			var v1, v2 int32
			for ; i < len(a) && refIsDigit(a[i]); i++ {
				v1 = v1*10 + int32(a[i]-'0')
			}
			for ; j < len(b) && refIsDigit(b[j]); j++ {
				v2 = v2*10 + int32(b[j]-'0')
			}
			if v1 != v2 {
				return int(v1 - v2)
			}
		case refIsDigit(ca):
			return 1
		case refIsDigit(cb):
			return -1
		case ca != cb:
			return char(ca) - char(cb)
		default:
			i++
			j++
		}
	}
	return -char(refAt(b, j))
}

func refAt(s string, i int) byte {
	if i < len(s) {
		return s[i]
	}
	return 0
}

func refIsDigit(c byte) bool { return '0' <= c && c <= '9' }

// refLayout writes entries in the given order as ldconfig does: header,
// entries, string table, then the extension directory with the
// glibc-hwcaps section (when there are such entries) and the generator
// string.
func refLayout(entries []Entry, order []int32) ([]byte, error) {
	// glibc-hwcaps subdirectories, sorted by strcmp: the loader merges
	// this list with its own sorted list.
	var subdirs []string
	for _, i := range order {
		if s := entries[i].HWCapsSubdir; s != "" {
			subdirs = append(subdirs, s)
		}
	}
	slices.Sort(subdirs)
	subdirs = slices.Compact(subdirs)

	// String table: each path, then each key that is not the tail of its
	// path (ldconfig shares those), then the subdirectory names. Offsets
	// are relative to the table until the entries are written.
	strStart := uint64(newHeaderSize + len(order)*newEntrySize)
	type refs struct{ key, value uint64 }
	rows := make([]refs, len(order))
	var size uint64
	add := func(s string) uint64 {
		off := size
		size += uint64(len(s)) + 1
		return off
	}
	for i, j := range order {
		r := &entries[j]
		rows[i].value = add(r.Path)
		if strings.HasSuffix(r.Path, r.Key) {
			rows[i].key = rows[i].value + uint64(len(r.Path)-len(r.Key))
		} else {
			rows[i].key = add(r.Key)
		}
	}
	subdirOff := make([]uint64, len(subdirs))
	for i, s := range subdirs {
		subdirOff[i] = add(s)
	}

	extOff := (strStart + size + 3) &^ 3
	nsec := uint64(1)
	if len(subdirs) > 0 {
		nsec = 2
	}
	hwcapsOff := extOff + extensionHdrSize + nsec*extensionSecSize
	genOff := hwcapsOff + uint64(4*len(subdirs))
	total := genOff + uint64(len(generator))
	if total > math.MaxUint32 {
		return nil, fmt.Errorf("a cache of %d entries would take %d bytes, more than its 32-bit offsets reach", len(order), total)
	}

	le := binary.LittleEndian
	out := make([]byte, total)
	copy(out, magicNew)
	le.PutUint32(out[offNlibs:], uint32(len(order)))
	le.PutUint32(out[offLenStrings:], uint32(size))
	out[offFlags] = flagsEndianLittle
	le.PutUint32(out[offExtension:], uint32(extOff))
	for i, j := range order {
		r := &entries[j]
		p := out[newHeaderSize+i*newEntrySize:]
		hwcap := r.HWCap
		if r.HWCapsSubdir != "" {
			idx, _ := slices.BinarySearch(subdirs, r.HWCapsSubdir)
			hwcap = hwcapExtension | r.HWCap&(isaLevelMask<<32) | uint64(idx)
		}
		le.PutUint32(p[0:], uint32(r.Flags))
		le.PutUint32(p[4:], uint32(strStart+rows[i].key))
		le.PutUint32(p[8:], uint32(strStart+rows[i].value))
		le.PutUint32(p[12:], r.OSVersion)
		le.PutUint64(p[16:], hwcap)
	}
	// Write the strings where add placed them, in the same order.
	str := out[strStart:]
	for i, j := range order {
		r := &entries[j]
		copy(str[rows[i].value:], r.Path)
		if !strings.HasSuffix(r.Path, r.Key) {
			copy(str[rows[i].key:], r.Key)
		}
	}
	for i, s := range subdirs {
		copy(str[subdirOff[i]:], s)
	}

	x := out[extOff:]
	le.PutUint32(x[0:], extensionMagic)
	le.PutUint32(x[4:], uint32(nsec))
	sec := x[extensionHdrSize:]
	le.PutUint32(sec[0:], tagGenerator)
	le.PutUint32(sec[8:], uint32(genOff))
	le.PutUint32(sec[12:], uint32(len(generator)))
	if len(subdirs) > 0 {
		sec = sec[extensionSecSize:]
		le.PutUint32(sec[0:], tagGlibcHWCaps)
		le.PutUint32(sec[8:], uint32(hwcapsOff))
		le.PutUint32(sec[12:], uint32(4*len(subdirs)))
		for i, off := range subdirOff {
			// In a new-format file the header is the file start, so
			// these offsets mean the same to every reader.
			le.PutUint32(out[hwcapsOff+uint64(4*i):], uint32(strStart+off))
		}
	}
	copy(out[genOff:], generator)
	return out, nil
}

// refMerge returns the cache existing with add merged in: every existing entry
// whose Key is not in add is kept as it is, glibc-hwcaps entries included;
// those whose Key is in add are replaced, so an image's own libcuda.so.1
// stub cannot shadow the host's. existing may be empty: an image without a
// cache (busybox:glibc, distroless) gets one with only add, and its loader
// still searches its default directories after the cache. An existing file
// that is not a cache fails with ErrFormat.
func refMerge(existing []byte, add []Entry) ([]byte, error) {
	var old []Entry
	if len(existing) > 0 {
		var err error
		if old, err = refParse(existing); err != nil {
			return nil, err
		}
	}
	replaced := make(map[string]bool, len(add))
	for _, e := range add {
		replaced[e.Key] = true
	}
	kept := slices.DeleteFunc(old, func(e Entry) bool { return replaced[e.Key] })
	return refEncode(append(kept, add...))
}
