package ldcache

import (
	"debug/elf"
	"encoding/binary"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/emulated"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/fixture"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/simhost"
)

// debugElfSoname is what readSoname must return, computed with the
// standard library's debug/elf (kept out of the hook for its start cost,
// not for any fault). known is false when debug/elf cannot say: it finds
// the dynamic table through the section headers, which a stripped file
// may lack.
func debugElfSoname(p string) (soname string, ok, known bool) {
	f, err := elf.Open(p)
	if err != nil {
		return "", false, true
	}
	defer f.Close()
	if f.Class != elf.ELFCLASS64 || f.Data != elf.ELFDATA2LSB || f.Type != elf.ET_DYN || f.Machine != map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[runtime.GOARCH] {
		return "", false, true
	}
	hasDyn := false
	for _, p := range f.Progs {
		hasDyn = hasDyn || p.Type == elf.PT_DYNAMIC
	}
	if !hasDyn {
		return "", false, true
	}
	if f.Section(".dynamic") == nil {
		return "", false, false
	}
	if strtab, err := f.DynValue(elf.DT_STRTAB); err != nil || len(strtab) == 0 {
		return "", false, true
	}
	names, err := f.DynString(elf.DT_SONAME)
	if err != nil {
		return "", false, false
	}
	switch {
	case len(names) == 0:
		return "", true, true
	case names[len(names)-1] == "":
		return "", false, true // ldconfig would key it by an empty name
	}
	return names[len(names)-1], true, true
}

// readSoname agrees with debug/elf on every file of every simulated host
// (real gcc-built libraries, executables, text files) and of the
// directory TestScanDir uses (truncated, foreign-machine and non-ELF
// files among them).
func TestReadSonameMatchesDebugElf(t *testing.T) {
	emulated.Skip(t, "libraries gcc builds for this machine (TestScanDirTakesThisMachinesLibraries checks the machine)")
	cache, err := fixture.DefaultCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	wslDir(t, filepath.Join(root, "scan"))
	for _, name := range simhost.Names() {
		p, err := simhost.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := fixture.Build(filepath.Join(root, name), p, fixture.Options{CacheDir: cache}); err != nil {
			t.Fatal(err)
		}
	}
	head := make([]byte, headRead)
	var scratch []byte
	compared, withSoname, libs := 0, 0, 0
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		want, wantOK, known := debugElfSoname(p)
		if !known {
			return nil
		}
		got, gotOK, err := readSoname(p, head, &scratch, nil)
		if err != nil {
			t.Errorf("readSoname(%s): %v", p, err)
			return nil
		}
		if got != want || gotOK != wantOK {
			t.Errorf("readSoname(%s) = %q, %v; debug/elf says %q, %v", p, got, gotOK, want, wantOK)
		}
		compared++
		if wantOK {
			libs++
		}
		if want != "" {
			withSoname++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The fixture holds dozens of libraries; far fewer means the walk
	// compared nothing worth the name.
	if libs < 20 || withSoname < 10 || compared == libs {
		t.Fatalf("compared %d files, %d shared objects, %d with a SONAME: the fixture is not what this test expects", compared, libs, withSoname)
	}
	t.Logf("compared %d files, %d shared objects, %d with a SONAME", compared, libs, withSoname)
}

// readsOf runs elfSoname on data as readSoname would on a file holding
// it, and fails on any read a hostile file must not cause: outside the
// bounds, or more of them than ldconfig's walk needs.
func readsOf(t *testing.T, data []byte) (string, bool) {
	t.Helper()
	reads := 0
	readAt := func(buf []byte, off int64) (int, error) {
		reads++
		if off < 0 || len(buf) > maxDynBytes {
			t.Fatalf("read of %d bytes at %d", len(buf), off)
		}
		if off >= int64(len(data)) {
			return 0, nil
		}
		return copy(buf, data[off:]), nil
	}
	var scratch []byte
	soname, ok, err := elfSoname(data[:min(len(data), headRead)], &scratch, readAt)
	if err != nil {
		t.Fatalf("elfSoname: %v (readAt never fails here)", err)
	}
	if reads > 3 {
		t.Fatalf("%d reads beyond the head; program headers, dynamic segment and name need at most 3", reads)
	}
	if ok && (strings.IndexByte(soname, 0) >= 0 || len(soname) >= maxSonameRead) {
		t.Fatalf("SONAME %q", soname)
	}
	return soname, ok
}

// hostileELF returns a copy of lib with its first PT_DYNAMIC claiming
// filesz bytes and its program headers moved to phoff.
func hostileELF(t testing.TB, lib []byte, filesz, phoff uint64) []byte {
	t.Helper()
	data := append([]byte(nil), lib...)
	le := binary.LittleEndian
	old := le.Uint64(data[32:])
	n := uint64(le.Uint16(data[56:]))
	for i := range n {
		ph := data[old+i*56:]
		if le.Uint32(ph) == elfPTDynamic {
			le.PutUint64(ph[32:], filesz)
			break
		}
	}
	if phoff != old {
		le.PutUint64(data[32:], phoff)
		if phoff+n*56 <= uint64(len(data)) {
			copy(data[phoff:], data[old:old+n*56])
		}
	}
	return data
}

func TestElfSonameHostile(t *testing.T) {
	emulated.Skip(t, "libraries gcc builds for this machine (TestScanDirTakesThisMachinesLibraries checks the machine)")
	dir := t.TempDir()
	buildLib(t, dir, "lib.so", "libwsl.so.1", 1)
	lib := readFile(t, filepath.Join(dir, "lib.so"))
	if got, ok := readsOf(t, lib); got != "libwsl.so.1" || !ok {
		t.Fatalf("real library: %q, %v", got, ok)
	}
	le := binary.LittleEndian
	tests := []struct {
		name   string
		data   []byte
		soname string
		ok     bool
	}{
		{"empty", nil, "", false},
		{"header only", lib[:64], "", false},
		{"dynamic segment claims 1 TiB", hostileELF(t, lib, 1<<40, le.Uint64(lib[32:])), "libwsl.so.1", true},
		{"program headers past the end", hostileELF(t, lib, 0x200, 1<<40), "", false},
		{"program headers at the last byte", hostileELF(t, lib, 0x200, uint64(len(lib)-1)), "", false},
		{"program headers at 2^63", hostileELF(t, lib, 0x200, 1<<63), "", false},
		{"cut after the program headers", lib[:1024], "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, ok := readsOf(t, tt.data); got != tt.soname || ok != tt.ok {
				t.Fatalf("elfSoname = %q, %v; want %q, %v", got, ok, tt.soname, tt.ok)
			}
		})
	}
}

// FuzzElfSoname: no file makes the reader panic, read out of bounds, read
// more than its limits, or return a name with a NUL in it.
func FuzzElfSoname(f *testing.F) {
	dir := f.TempDir()
	buildLib(f, dir, "with.so", "libwsl.so.1", 1)
	buildLib(f, dir, "without.so", "", 1)
	for _, n := range []string{"with.so", "without.so"} {
		lib, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(lib)
		f.Add(lib[:64])
		f.Add(lib[:1024])
		f.Add(hostileELF(f, lib, 1<<40, binary.LittleEndian.Uint64(lib[32:])))
	}
	f.Add([]byte("\x7fELF\x02\x01"))
	f.Fuzz(func(t *testing.T, data []byte) {
		readsOf(t, data)
	})
}
