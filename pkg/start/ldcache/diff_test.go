package ldcache

import (
	"archive/tar"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// debianCache is the Debian minbase image's /etc/ld.so.cache from the e2e
// tests' image cache, nil when that cache was never filled.
func debianCache(t testing.TB) []byte {
	t.Helper()
	f, err := os.Open("/var/cache/wsl-gpu-hook-e2e/debian-bookworm-minbase-v1.tar")
	if err != nil {
		return nil
	}
	defer f.Close()
	r := tar.NewReader(f)
	for {
		h, err := r.Next()
		if err != nil {
			t.Logf("no etc/ld.so.cache in the Debian image tarball: %v", err)
			return nil
		}
		if strings.TrimPrefix(h.Name, "./") == "etc/ld.so.cache" {
			data, err := io.ReadAll(r)
			if err != nil {
				t.Fatal(err)
			}
			return data
		}
	}
}

// realCaches are the caches the differential tests start from: testdata,
// this machine's and the Debian image's.
func realCaches(t testing.TB) map[string][]byte {
	t.Helper()
	caches := map[string][]byte{}
	for _, name := range []string{"new", "compat", "old", "legacy"} {
		caches[name] = readFile(t, filepath.Join("testdata", name+".cache"))
	}
	if data, err := os.ReadFile("/etc/ld.so.cache"); err == nil {
		caches["host"] = data
	}
	if data := debianCache(t); data != nil {
		caches["debian"] = data
	}
	return caches
}

// wslAdd is what the hook merges: the WSL libraries, one of them a name
// images ship as a stub.
func wslAdd() []Entry {
	add := make([]Entry, len(wslNames))
	for i, n := range wslNames {
		add[i] = Entry{Key: n, Path: "/usr/lib/wsl/lib/" + n, Flags: FlagX8664Libc6}
	}
	return add
}

// sameResult fails unless Merge and the reference agree byte for byte,
// errors included.
func sameResult(t *testing.T, existing []byte, add []Entry) {
	t.Helper()
	want, wantErr := refMerge(existing, add)
	got, err := Merge(existing, add)
	if errors.Is(err, errLimit) {
		// The reference has no limits (TestLimits covers them).
		return
	}
	if (err == nil) != (wantErr == nil) || err != nil && (err.Error() != wantErr.Error() || errors.Is(err, ErrFormat) != errors.Is(wantErr, ErrFormat)) {
		t.Fatalf("Merge error %v, reference %v", err, wantErr)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("Merge wrote %d bytes that differ from the reference's %d (first difference at %d)", len(got), len(want), firstDiff(got, want))
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestMergeMatchesReference: the in-place Merge writes exactly what the
// Entry-based one did, for real caches, for every entry a merge can
// replace, and for broken variants of them.
func TestMergeMatchesReference(t *testing.T) {
	for name, data := range realCaches(t) {
		t.Run(name, func(t *testing.T) {
			entries, err := refParse(data)
			if err != nil {
				t.Fatal(err)
			}
			adds := map[string][]Entry{
				"wsl":     wslAdd(),
				"nothing": nil,
				// A prefix of existing keys (libfoo.so.2, libc.so.6)
				// replaces none of them.
				"prefix": {{Key: "libfoo.so", Path: "/usr/lib/wsl/lib/libfoo.so", Flags: FlagX8664Libc6}, {Key: "libc.so", Path: "/x/libc.so", Flags: FlagX8664Libc6}},
				"NUL":    append(wslAdd(), Entry{Key: "libbad.so\x00", Path: "/x"}, Entry{Key: "libok.so", Path: "/y\x00"}),
				"hwcaps": append(wslAdd(), Entry{Key: "libh.so.1", Path: "/usr/lib/wsl/lib/v3/libh.so.1", Flags: FlagX8664Libc6, HWCap: hwcapExtension | 3<<32 | 7, HWCapsSubdir: "x86-64-v3"},
					Entry{Key: "libdrop.so.1", Path: "/drop", Flags: FlagX8664Libc6, HWCap: hwcapExtension}),
			}
			// Replace existing keys in turn: first, last, every eighth
			// and every hwcaps entry's.
			for i, e := range entries {
				if i%8 != 0 && i != len(entries)-1 && e.HWCap == 0 {
					continue
				}
				adds[fmt.Sprintf("replace %d %s", i, e.Key)] = append(wslAdd(), Entry{Key: e.Key, Path: "/usr/lib/wsl/lib/" + e.Key, Flags: FlagX8664Libc6})
			}
			for a, add := range adds {
				sameResult(t, data, add)
				if !strings.HasPrefix(a, "replace ") {
					t.Run("nil existing "+a, func(t *testing.T) { sameResult(t, nil, add) })
				}
			}
			// Broken variants: truncated, each entry's offsets and hwcap
			// bytes corrupted, the extension directory moved.
			for _, cut := range []int{0, 1, 11, 16, 20, 47, 48, 60, len(data) / 2, len(data) - 1} {
				if cut <= len(data) {
					sameResult(t, data[:cut], wslAdd())
				}
			}
			for i := 0; i+4 <= len(data) && i < 48+24*64; i += 4 {
				last := uint32(bytes.LastIndexByte(data, 0))
				for _, v := range []uint32{0, 1, 0xffffffff, uint32(len(data)), uint32(len(data) - 1), last, last + 1, 0x40000000, 0xeaa42174} {
					c := bytes.Clone(data)
					binary.LittleEndian.PutUint32(c[i:], v)
					sameResult(t, c, wslAdd())
				}
			}
		})
	}
}

// FuzzMergeMatchesReference compares Merge with the reference on fuzzed
// caches and fuzzed entries to merge: each line of spec is
// key[|path[|subdir]].
func FuzzMergeMatchesReference(f *testing.F) {
	for _, data := range realCaches(f) {
		f.Add(data, "libcuda.so.1\nlibdxcore.so|/usr/lib/wsl/lib/libdxcore.so\nlibh.so.1|/v3/libh.so.1|x86-64-v3")
	}
	for _, name := range []string{"new", "compat", "old", "legacy"} {
		data := readFile(f, filepath.Join("testdata", name+".cache"))
		f.Add(data[:len(data)/2], "libfoo.so.2")
		f.Add(data, "libh.so.1|/x|\nlibfoo.so.10|/usr/lib/x86_64-linux-gnu/libfoo.so.10")
	}
	f.Add(header(0, 0), "")
	f.Fuzz(func(t *testing.T, data []byte, spec string) {
		var add []Entry
		if spec != "" {
			for i, line := range strings.Split(spec, "\n") {
				parts := strings.SplitN(line, "|", 3)
				e := Entry{Key: parts[0], Path: "/usr/lib/wsl/lib/" + parts[0], Flags: FlagX8664Libc6, OSVersion: uint32(i % 3)}
				if len(parts) > 1 {
					e.Path = parts[1]
				}
				if len(parts) > 2 {
					e.HWCapsSubdir = parts[2]
					e.HWCap = hwcapExtension | uint64(i%4)<<32 | uint64(i)
				}
				add = append(add, e)
			}
		}
		sameResult(t, data, add)
		if entries, err := refParse(data); err == nil {
			want, wantErr := refEncode(entries)
			got, err := Merge(nil, entries)
			if (err == nil) != (wantErr == nil) || !bytes.Equal(got, want) {
				t.Fatalf("Merge into no cache differs from the reference's encoding: %v / %v", err, wantErr)
			}
		}
	})
}
