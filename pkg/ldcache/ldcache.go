package ldcache

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
)

const (
	magicNew   = "glibc-ld.so.cache1.1"
	magicOld   = "ld.so-1.7.0"
	headerSize = 48 // cache_file_new up to libs[]
	entrySize  = 24 // file_entry_new
	oldEntry   = 12 // file_entry of the old format

	// FlagX8664Libc6 is FLAG_ELF_LIBC6 | FLAG_X8664_LIB64: what ldconfig
	// records for an x86_64 glibc shared object.
	FlagX8664Libc6 int32 = 0x0303

	// flagsEndianLittle is cache_file_new_flags_endian_little.
	flagsEndianLittle = 2
	// hwcapExtension marks an entry whose hwcap field indexes the
	// glibc-hwcaps list of the extension section (DL_CACHE_HWCAP_EXTENSION).
	hwcapExtension = uint64(1) << 62

	// maxEntries bounds what Parse accepts; real caches hold a few thousand.
	maxEntries = 1 << 20
)

// Entry is one row of the cache: the name a program asks for (its SONAME)
// and the file the loader opens.
type Entry struct {
	Key       string
	Path      string
	Flags     int32
	OSVersion uint32
	HWCap     uint64
}

// ErrFormat reports bytes that are not a loader cache.
var ErrFormat = errors.New("not a glibc loader cache")

// Parse decodes a cache in the new format, with or without the old-format
// table in front.
func Parse(data []byte) ([]Entry, error) {
	c, err := parse(data)
	if err != nil {
		return nil, err
	}
	return c.entries, nil
}

type cache struct {
	entries []Entry
}

func parse(data []byte) (*cache, error) {
	base := 0
	if bytes.HasPrefix(data, []byte(magicOld)) {
		// Old header: magic[11], pad, nlibs u32, then 12-byte entries; the
		// new header follows, 8-byte aligned.
		if len(data) < 16 {
			return nil, fmt.Errorf("%w: truncated old header", ErrFormat)
		}
		n := binary.LittleEndian.Uint32(data[12:16])
		if n > maxEntries {
			return nil, fmt.Errorf("%w: %d old entries", ErrFormat, n)
		}
		base = 16 + int(n)*oldEntry
		base = (base + 7) &^ 7
		if base > len(data) {
			return nil, fmt.Errorf("%w: truncated old table", ErrFormat)
		}
	}
	d := data[base:]
	if len(d) < headerSize || string(d[:len(magicNew)]) != magicNew {
		return nil, fmt.Errorf("%w: bad magic", ErrFormat)
	}
	nlibs := binary.LittleEndian.Uint32(d[20:24])
	if flags := d[28] & 3; flags != 0 && flags != flagsEndianLittle {
		return nil, fmt.Errorf("%w: not little-endian", ErrFormat)
	}
	if nlibs > maxEntries || headerSize+int(nlibs)*entrySize > len(d) {
		return nil, fmt.Errorf("%w: %d entries do not fit in %d bytes", ErrFormat, nlibs, len(d))
	}
	str := func(off uint32) (string, error) {
		// Offsets count from the new header; a string runs to its NUL.
		if int(off) >= len(d) {
			return "", fmt.Errorf("%w: string offset %d out of range", ErrFormat, off)
		}
		end := bytes.IndexByte(d[off:], 0)
		if end < 0 {
			return "", fmt.Errorf("%w: unterminated string at %d", ErrFormat, off)
		}
		return string(d[off : int(off)+end]), nil
	}
	c := &cache{entries: make([]Entry, 0, nlibs)}
	for i := 0; i < int(nlibs); i++ {
		e := d[headerSize+i*entrySize:]
		key, err := str(binary.LittleEndian.Uint32(e[4:8]))
		if err != nil {
			return nil, err
		}
		val, err := str(binary.LittleEndian.Uint32(e[8:12]))
		if err != nil {
			return nil, err
		}
		c.entries = append(c.entries, Entry{
			Key:       key,
			Path:      val,
			Flags:     int32(binary.LittleEndian.Uint32(e[0:4])),
			OSVersion: binary.LittleEndian.Uint32(e[12:16]),
			HWCap:     binary.LittleEndian.Uint64(e[16:24]),
		})
	}
	return c, nil
}

// Encode writes entries as a new-format cache in the order the loader's
// binary search needs. It writes no extension section, so entries that
// point into one (glibc-hwcaps variants of a library) are dropped: the
// loader then uses the baseline build of that library, which has its own
// entry.
func Encode(entries []Entry) []byte {
	return encode(&cache{entries: entries})
}

func encode(c *cache) []byte {
	var keep []Entry
	for _, e := range c.entries {
		if e.HWCap&hwcapExtension != 0 {
			continue
		}
		keep = append(keep, e)
	}
	sortEntries(keep)

	// String table: keys and paths, shared when equal.
	strOff := map[string]uint32{}
	var strs bytes.Buffer
	start := uint32(headerSize + len(keep)*entrySize)
	intern := func(s string) uint32 {
		if off, ok := strOff[s]; ok {
			return off
		}
		off := start + uint32(strs.Len())
		strs.WriteString(s)
		strs.WriteByte(0)
		strOff[s] = off
		return off
	}
	type row struct{ key, val uint32 }
	rows := make([]row, len(keep))
	for i, e := range keep {
		rows[i] = row{intern(e.Key), intern(e.Path)}
	}

	out := make([]byte, start, int(start)+strs.Len())
	copy(out, magicNew)
	binary.LittleEndian.PutUint32(out[20:], uint32(len(keep)))
	binary.LittleEndian.PutUint32(out[24:], uint32(strs.Len()))
	out[28] = flagsEndianLittle
	for i, e := range keep {
		p := out[headerSize+i*entrySize:]
		binary.LittleEndian.PutUint32(p[0:], uint32(e.Flags))
		binary.LittleEndian.PutUint32(p[4:], rows[i].key)
		binary.LittleEndian.PutUint32(p[8:], rows[i].val)
		binary.LittleEndian.PutUint32(p[12:], e.OSVersion)
		binary.LittleEndian.PutUint64(p[16:], e.HWCap)
	}
	out = append(out, strs.Bytes()...)
	return out
}

// sortEntries orders entries as ldconfig does: descending by library name
// under _dl_cache_libcmp, then by flags and hwcap descending, so the loader's
// binary search and its scan over equal keys find them.
func sortEntries(e []Entry) {
	sort.SliceStable(e, func(i, j int) bool {
		if c := Libcmp(e[i].Key, e[j].Key); c != 0 {
			return c > 0
		}
		if e[i].Flags != e[j].Flags {
			return e[i].Flags > e[j].Flags
		}
		return e[i].HWCap > e[j].HWCap
	})
}

// Libcmp is glibc's _dl_cache_libcmp: byte order, except that runs of
// digits compare as numbers and a digit sorts after a non-digit.
func Libcmp(a, b string) int {
	i, j := 0, 0
	for i < len(a) {
		switch {
		case isDigit(a[i]) && j < len(b) && isDigit(b[j]):
			v1, v2 := 0, 0
			for i < len(a) && isDigit(a[i]) {
				v1 = v1*10 + int(a[i]-'0')
				i++
			}
			for j < len(b) && isDigit(b[j]) {
				v2 = v2*10 + int(b[j]-'0')
				j++
			}
			if v1 != v2 {
				return v1 - v2
			}
		case isDigit(a[i]):
			return 1
		case j < len(b) && isDigit(b[j]):
			return -1
		case j >= len(b) || a[i] != b[j]:
			return int(a[i]) - int(at(b, j))
		default:
			i++
			j++
		}
	}
	return -int(at(b, j))
}

func at(s string, i int) byte {
	if i < len(s) {
		return s[i]
	}
	return 0
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// Merge returns existing with add merged in: every entry whose key is in
// add is replaced (an image's own libcuda.so.1 stub must not shadow the
// host's), the rest are kept. An empty existing cache is fine: the loader
// still searches its default directories after the cache.
func Merge(existing []byte, add []Entry) ([]byte, error) {
	c := &cache{}
	if len(existing) > 0 {
		var err error
		if c, err = parse(existing); err != nil {
			return nil, fmt.Errorf("the image's loader cache: %w", err)
		}
	}
	ours := map[string]bool{}
	for _, e := range add {
		ours[e.Key] = true
	}
	merged := make([]Entry, 0, len(c.entries)+len(add))
	for _, e := range c.entries {
		if !ours[e.Key] {
			merged = append(merged, e)
		}
	}
	c.entries = append(merged, add...)
	return encode(c), nil
}
