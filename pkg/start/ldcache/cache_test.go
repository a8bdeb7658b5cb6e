package ldcache

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"testing"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/emulated"
)

// The testdata caches were written by Debian's glibc 2.36 ldconfig
// (-c new, compat, old) for a root holding libh.so.1 with x86-64-v2 and
// x86-64-v3 glibc-hwcaps variants, libfoo.so.2, libfoo.so.10 and
// libcuda.so.1; legacy.cache holds libh.so.1 in the legacy hwcap
// subdirectories 2.36 still knew (tls, haswell, x86_64). The .txt files are
// what its `ldconfig -p` printed for them. The reference reader (ref_test.go),
// the tests' one oracle, must see what glibc saw.
func TestReferenceMatchesGlibcReader(t *testing.T) {
	for _, name := range []string{"new", "compat", "old", "legacy"} {
		t.Run(name, func(t *testing.T) {
			entries, err := refParse(readFile(t, filepath.Join("testdata", name+".cache")))
			if err != nil {
				t.Fatal(err)
			}
			want := entryLines(string(readFile(t, filepath.Join("testdata", name+".cache.txt"))))
			if got := listing(entries); got != want {
				t.Fatalf("the reference sees\n%s\nglibc 2.36 saw\n%s", got, want)
			}
		})
	}
}

// hostCache is this machine's real cache, read-only.
func hostCache(t testing.TB) []byte {
	t.Helper()
	data, err := os.ReadFile("/etc/ld.so.cache")
	if err != nil {
		t.Skipf("no loader cache on this machine: %v", err)
	}
	return data
}

func TestReferenceReadsHostCache(t *testing.T) {
	entries, err := refParse(hostCache(t))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := listing(entries), ldconfigList(t, "/etc/ld.so.cache"); got != want {
		t.Fatalf("the reference and ldconfig -p disagree on /etc/ld.so.cache:\n%s\n---- ldconfig -p\n%s", got, want)
	}
	i := slices.IndexFunc(entries, func(e Entry) bool { return e.Key == "libc.so.6" })
	if i < 0 {
		t.Fatalf("libc.so.6 is not among %d entries", len(entries))
	}
	if e := entries[i]; e.Flags != FlagX8664Libc6 || filepath.Base(e.Path) != "libc.so.6" {
		t.Fatalf("libc.so.6 entry: %+v", e)
	}
	if _, err := os.Stat(entries[i].Path); err != nil {
		t.Fatalf("libc.so.6 entry names a missing file: %v", err)
	}
}

// shuffleKeys shuffles entries but keeps entries with equal keys in their
// order: among those, order is data (the loader takes the first usable).
func shuffleKeys(entries []Entry, seed uint64) []Entry {
	var groups [][]Entry
	for i, e := range entries {
		if i > 0 && entries[i-1].Key == e.Key {
			groups[len(groups)-1] = append(groups[len(groups)-1], e)
			continue
		}
		groups = append(groups, []Entry{e})
	}
	r := rand.New(rand.NewPCG(seed, seed))
	r.Shuffle(len(groups), func(i, j int) { groups[i], groups[j] = groups[j], groups[i] })
	return slices.Concat(groups...)
}

// glibc's reader must list our encoding exactly as ldconfig's own file, in
// the same order: the order is what the loader's binary search relies on.
func TestEncodeMatchesLdconfig(t *testing.T) {
	needTool(t, "ldconfig")
	tests := []struct {
		name string
		file string
		// reverse reverses all entries, equal keys included: only for
		// files where no two entries compare equal.
		reverse bool
	}{
		{"host cache", "/etc/ld.so.cache", false},
		{"glibc-hwcaps entries", "testdata/new.cache", true},
		{"legacy hwcaps entries", "testdata/legacy.cache", true},
		{"old format", "testdata/old.cache", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data, err := os.ReadFile(tt.file)
			if err != nil {
				t.Skipf("%v", err)
			}
			entries, err := refParse(data)
			if err != nil {
				t.Fatal(err)
			}
			in := shuffleKeys(entries, 1)
			if tt.reverse {
				slices.Reverse(entries)
				in = entries
			}
			out, err := Merge(nil, in)
			if err != nil {
				t.Fatal(err)
			}
			ours := filepath.Join(t.TempDir(), "ld.so.cache")
			writeFile(t, ours, out)
			if got, want := ldconfigList(t, ours), ldconfigList(t, tt.file); got != want {
				t.Fatalf("glibc reads our cache differently:\n%s\n---- from ldconfig's\n%s", got, want)
			}
		})
	}
}

// Names chosen to hit every branch of _dl_cache_libcmp; ldconfig's order is
// the reference. 3000000000 overflows C's int and sorts below 1; é is two
// bytes above 0x7f, negative as x86_64's signed char, so it sorts below
// every ASCII name.
func TestSortMatchesLdconfig(t *testing.T) {
	emulated.Skip(t, "comparing with the host's ldconfig, which is this machine's only natively")
	needTool(t, "ldconfig")
	root := t.TempDir()
	dir := filepath.Join(root, "l")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	buildLib(t, dir, "libtemplate.so", "", 1)
	lib := readFile(t, filepath.Join(dir, "libtemplate.so"))
	for _, n := range []string{"libfoo.so.1", "libfoo.so.10", "libfoo.so.2", "libfoo.so", "libfoo.so.3000000000",
		"libfoo.so.1a", "libfoo2.so", "libfooa.so", "libé.so.1", "libe.so.1", "libE.so.1", "lib_x.so", "libz.so.1",
		"libzstd.so.1", "libbar-2.0.so.0", "libfoo.so.007", "libfoo.so.0.99999999999"} {
		writeFile(t, filepath.Join(dir, n), lib) // no SONAME: the key is the file name
	}
	data, _ := ldconfigRoot(t, root, "/l", "new")
	theirs, err := refParse(data)
	if err != nil {
		t.Fatal(err)
	}
	reversed := slices.Clone(theirs)
	slices.Reverse(reversed)
	out, err := Merge(nil, reversed)
	if err != nil {
		t.Fatal(err)
	}
	ours, err := refParse(out)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := listing(ours), listing(theirs); got != want {
		t.Fatalf("our order\n%s\nldconfig's\n%s", got, want)
	}
}

func TestLibcmp(t *testing.T) {
	// C's char is signed on x86_64 and unsigned on aarch64: é's first
	// byte, 0xc3, sorts below 'z' on one and above it on the other, and
	// each machine's ldconfig and loader agree with their own.
	highByte := map[string]int{"amd64": -1, "arm64": 1}[runtime.GOARCH]
	if highByte == 0 {
		t.Fatalf("no char signedness known for GOARCH=%s", runtime.GOARCH)
	}
	tests := []struct {
		a, b string
		want int // sign only
	}{
		{"libfoo.so.10", "libfoo.so.2", 1},
		{"libfoo.so.2", "libfoo.so.10", -1},
		{"libfoo.so.1", "libfoo.so.01", 0},
		{"libfoo.so.1", "libfoo.so", 1},
		{"libz.so.1", "libzstd.so.1", -1},
		{"lib2.so", "libx.so", 1},
		{"libcuda.so.1", "libcuda.so.1.1", -1},
		{"libfoo.so.3000000000", "libfoo.so.1", -1}, // int overflow, as in C
		{"libé.so", "libz.so", highByte},
		{"", "", 0},
		{"", "a", -1},
	}
	for _, tt := range tests {
		t.Run(tt.a+"_"+tt.b, func(t *testing.T) {
			got := libcmp(tt.a, tt.b)
			if sign(got) != tt.want {
				t.Fatalf("libcmp(%q, %q) = %d, want sign %d", tt.a, tt.b, got, tt.want)
			}
			if back := libcmp(tt.b, tt.a); sign(back) != -tt.want {
				t.Fatalf("libcmp(%q, %q) = %d, not the opposite", tt.b, tt.a, back)
			}
		})
	}
}

func sign(x int) int {
	switch {
	case x > 0:
		return 1
	case x < 0:
		return -1
	}
	return 0
}

// header builds a new-format header for malformed inputs.
func header(nlibs uint32, flags byte, rest ...byte) []byte {
	h := make([]byte, newHeaderSize)
	copy(h, magicNew)
	binary.LittleEndian.PutUint32(h[offNlibs:], nlibs)
	h[offFlags] = flags
	return append(h, rest...)
}

// TestOpenRejects: what Merge refuses to read as an image's cache.
func TestOpenRejects(t *testing.T) {
	oneEntry := header(1, 2, make([]byte, newEntrySize)...)
	binary.LittleEndian.PutUint32(oneEntry[newHeaderSize+4:], 4096)
	unterminated := header(1, 2, make([]byte, newEntrySize)...)
	binary.LittleEndian.PutUint32(unterminated[newHeaderSize+4:], 72)
	unterminated = append(unterminated, "libc.so.6"...)
	oldTooMany := append([]byte(magicOld+"\x00"), 9, 0, 0, 0)
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, `not a glibc loader cache: no "glibc-ld.so.cache1.1" or "ld.so-1.7.0" magic at the start`},
		{"script", []byte("#!/bin/sh\n"), `not a glibc loader cache: no "glibc-ld.so.cache1.1" or "ld.so-1.7.0" magic at the start`},
		{"magic only", []byte(magicNew), "not a glibc loader cache: 20 bytes end inside the header"},
		{"too many entries", header(1000, 2), "not a glibc loader cache: 1000 entries do not fit in 48 bytes"},
		{"big-endian", header(0, 3), "not a glibc loader cache: header flags 0x3 say it is not little-endian"},
		{"endian invalid", header(0, 1), "not a glibc loader cache: header flags 0x1 say it is not little-endian"},
		{"key out of range", oneEntry, "not a glibc loader cache: entry 0: string offset 4096 or 0 outside the file or unterminated"},
		{"unterminated key", unterminated, "not a glibc loader cache: entry 0: string offset 72 or 0 outside the file or unterminated"},
		{"old truncated", []byte(magicOld), "not a glibc loader cache: 11 bytes end inside the old-format header"},
		{"old too many entries", oldTooMany, "not a glibc loader cache: 9 old-format entries do not fit in 16 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := open(tt.data)
			if err == nil || err.Error() != tt.want {
				t.Fatalf("open error %v, want %s", err, tt.want)
			}
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("%v does not wrap ErrFormat", err)
			}
		})
	}
}

// Like the loader, a broken extension directory costs only the
// glibc-hwcaps entries (their names are unknown), not the cache.
func TestMergeBadExtension(t *testing.T) {
	data := readFile(t, "testdata/new.cache")
	ext := binary.LittleEndian.Uint32(data[offExtension:])
	data[ext] ^= 0xff // magic
	out, err := Merge(data, nil)
	if err != nil {
		t.Fatal(err)
	}
	back, err := refParse(out)
	if err != nil {
		t.Fatal(err)
	}
	want := "" +
		"\tlibh.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libh.so.1\n" +
		"\tlibfoo.so.10 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libfoo.so.10\n" +
		"\tlibfoo.so.2 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libfoo.so.2\n" +
		"\tlibcuda.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcuda.so.1\n"
	if got := listing(back); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

func TestMergeRejectsNUL(t *testing.T) {
	_, err := Merge(nil, []Entry{
		{Key: "libok.so.1", Path: "/lib/libok.so.1", Flags: FlagX8664Libc6},
		{Key: "libbad.so.1\x00", Path: "/lib/libbad.so.1", Flags: FlagX8664Libc6},
	})
	want := `entry 1 ("libbad.so.1\x00"): a NUL byte cannot be stored`
	if err == nil || err.Error() != want {
		t.Fatalf("Merge error %v, want %s", err, want)
	}
}

func TestMerge(t *testing.T) {
	wsl := []Entry{
		{Key: "libcuda.so.1", Path: "/usr/lib/wsl/lib/libcuda.so.1", Flags: FlagX8664Libc6},
		{Key: "libdxcore.so", Path: "/usr/lib/wsl/lib/libdxcore.so", Flags: FlagX8664Libc6},
	}
	const (
		hwcapsV2 = "\tlibh.so.1 (libc6,x86-64, hwcap: \"x86-64-v2\") => /usr/lib/x86_64-linux-gnu/glibc-hwcaps/x86-64-v2/libh.so.1\n"
		hwcapsV3 = "\tlibh.so.1 (libc6,x86-64, hwcap: \"x86-64-v3\") => /usr/lib/x86_64-linux-gnu/glibc-hwcaps/x86-64-v3/libh.so.1\n"
		libh     = "\tlibh.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libh.so.1\n"
		oldV2    = "\tlibh.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/glibc-hwcaps/x86-64-v2/libh.so.1\n"
		oldV3    = "\tlibh.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/glibc-hwcaps/x86-64-v3/libh.so.1\n"
		foo      = "\tlibfoo.so.10 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libfoo.so.10\n" +
			"\tlibfoo.so.2 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libfoo.so.2\n"
		dxcore = "\tlibdxcore.so (libc6,x86-64) => /usr/lib/wsl/lib/libdxcore.so\n"
		cuda   = "\tlibcuda.so.1 (libc6,x86-64) => /usr/lib/wsl/lib/libcuda.so.1\n"
	)
	tests := []struct {
		name     string
		existing []byte
		want     string
	}{
		{"image stub replaced, glibc-hwcaps kept", readFile(t, "testdata/new.cache"), hwcapsV2 + hwcapsV3 + libh + foo + dxcore + cuda},
		// glibc itself cannot read the hwcaps names of an old+new file
		// (see Parse): the entry whose name reads as "" is dropped, the
		// other keeps its unusable name; the loader uses neither.
		{"old+new format", readFile(t, "testdata/compat.cache"), "\tlibh.so.1 (libc6,x86-64, hwcap: \"\xfa\") => /usr/lib/x86_64-linux-gnu/glibc-hwcaps/x86-64-v3/libh.so.1\n" + libh + foo + dxcore + cuda},
		{"old format", readFile(t, "testdata/old.cache"), oldV2 + oldV3 + libh + foo + dxcore + cuda},
		{"image without a cache", nil, dxcore + cuda},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := Merge(tt.existing, wsl)
			if err != nil {
				t.Fatal(err)
			}
			entries, err := refParse(out)
			if err != nil {
				t.Fatal(err)
			}
			if got := listing(entries); got != tt.want {
				t.Fatalf("merged:\n%s\nwant\n%s", got, tt.want)
			}
			// A restarted container merges again: same bytes.
			again, err := Merge(out, wsl)
			if err != nil || !bytes.Equal(again, out) {
				t.Fatalf("second merge differs (err %v)", err)
			}
			if _, err := exec.LookPath("ldconfig"); err == nil {
				p := filepath.Join(t.TempDir(), "ld.so.cache")
				writeFile(t, p, out)
				if got := ldconfigList(t, p); got != tt.want {
					t.Fatalf("ldconfig -p reads the merged cache as\n%s\nwant\n%s", got, tt.want)
				}
			}
		})
	}
}

func TestMergeRejectsGarbage(t *testing.T) {
	_, err := Merge([]byte("\x7fELF not a cache"), nil)
	if !errors.Is(err, ErrFormat) {
		t.Fatalf("Merge of garbage: %v, want ErrFormat", err)
	}
}

// normalized is what refParse(Merge(nil, entries)) must return: entries in
// encoding order, unusable glibc-hwcaps entries dropped, hwcaps indices
// (which belong to one file) cleared.
func normalized(entries []Entry) []Entry {
	var out []Entry
	for _, e := range entries {
		if isExtension(e.HWCap) && e.HWCapsSubdir == "" {
			continue
		}
		if e.HWCapsSubdir != "" {
			e.HWCap &^= 1<<32 - 1
		}
		out = append(out, e)
	}
	slices.SortStableFunc(out, func(a, b Entry) int { return compare(&a, &b) })
	return out
}

// FuzzRoundTrip: Merge refuses a file with ErrFormat or reads it, and
// what the reference reads back from Merge's encoding of the reference's
// entries is those entries, normalized.
func FuzzRoundTrip(f *testing.F) {
	for _, name := range []string{"new", "compat", "old", "legacy"} {
		data, err := os.ReadFile(filepath.Join("testdata", name+".cache"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
		f.Add(data[:len(data)/2])
	}
	f.Add(header(0, 0))
	f.Add([]byte(magicOld + "\x00\x02\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if _, err := Merge(data, nil); err != nil && !errors.Is(err, ErrFormat) {
			t.Fatalf("error %v does not wrap ErrFormat", err)
		}
		entries, err := refParse(data)
		if err != nil {
			return
		}
		out, err := Merge(nil, entries)
		if err != nil {
			t.Fatalf("encoding the parsed entries: %v", err)
		}
		back, err := refParse(out)
		if err != nil {
			t.Fatalf("the reference cannot read our encoding: %v", err)
		}
		for i := range back {
			if back[i].HWCapsSubdir != "" {
				back[i].HWCap &^= 1<<32 - 1
			}
		}
		if want := normalized(entries); !slices.Equal(back, want) {
			t.Fatalf("round trip:\n%s\nwant\n%s", listing(back), listing(want))
		}
	})
}
