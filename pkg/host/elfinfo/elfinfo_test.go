package elfinfo

import (
	"bytes"
	"debug/elf"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/fixture"
)

// fromDebugElf is what debug/elf says about the file at p, the oracle:
// ok is false if debug/elf refuses it.
func fromDebugElf(t *testing.T, data []byte) (File, bool) {
	t.Helper()
	ef, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return File{}, false
	}
	f := File{Type: Type(ef.Type)}
	if s, err := ef.DynString(elf.DT_SONAME); err == nil && len(s) > 0 {
		f.Soname = s[0]
	}
	if v, err := ef.DynValue(elf.DT_FLAGS_1); err == nil && len(v) > 0 {
		f.Flags1 = v[0]
	}
	for _, p := range ef.Progs {
		if p.Type == elf.PT_INTERP {
			f.Interp = true
		}
	}
	return f, true
}

// agree checks Read against debug/elf on every regular ELF file below dir,
// and returns how many it compared.
func agree(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil || !bytes.HasPrefix(data, []byte("\x7fELF")) {
			return nil
		}
		want, ok := fromDebugElf(t, data)
		got, err := Read(bytes.NewReader(data))
		switch {
		case !ok && err == nil:
			t.Logf("%s: debug/elf refuses it, Read reads %+v", p, got)
		case ok && err != nil:
			t.Errorf("%s: %v; debug/elf reads %+v", p, err, want)
		case ok && got != want:
			t.Errorf("%s: Read %+v, debug/elf %+v", p, got, want)
		}
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestReadAgreesWithDebugElfOnFixtures(t *testing.T) {
	dir := fixture.Host(t, "nvidia-laptop", fixture.Options{})
	if n := agree(t, dir); n < 10 {
		t.Errorf("compared %d fixture ELF files, want the fixture's libraries and nvidia-smi", n)
	}
}

func TestReadAgreesWithDebugElfOnSystem(t *testing.T) {
	var n int
	for _, dir := range []string{"/usr/lib/x86_64-linux-gnu", "/usr/bin", "/usr/lib/wsl"} {
		if _, err := os.Stat(dir); err == nil {
			n += agree(t, dir)
		}
	}
	if n == 0 {
		t.Skip("no system ELF files here")
	}
	t.Logf("compared %d ELF files", n)
}

func TestReadKinds(t *testing.T) {
	libc, err := os.ReadFile("/usr/lib/x86_64-linux-gnu/libc.so.6")
	if err != nil {
		t.Skip(err)
	}
	f, err := Read(bytes.NewReader(libc))
	if err != nil || f.Type != TypeDyn || f.Soname != "libc.so.6" || f.Flags1&DF1PIE != 0 {
		t.Errorf("libc.so.6: %+v, %v; want a shared object named libc.so.6", f, err)
	}
	sh, err := os.ReadFile("/usr/bin/ls")
	if err != nil {
		t.Skip(err)
	}
	f, err = Read(bytes.NewReader(sh))
	if err != nil || !f.Interp || f.Soname != "" || (f.Type == TypeDyn && f.Flags1&DF1PIE == 0) {
		t.Errorf("/usr/bin/ls: %+v, %v; want a PIE program", f, err)
	}
}

func TestReadDamaged(t *testing.T) {
	tests := []struct {
		name    string
		data    string
		wantErr string
		notELF  bool
	}{
		{name: "empty", data: "", notELF: true},
		{name: "short magic", data: "\x7fEL", notELF: true},
		{name: "not ELF", data: "MZ\x90\x00 a Windows file, longer than sixteen bytes", notELF: true},
		{name: "cut after the magic", data: "\x7fELF\x02\x01", wantErr: "ELF identification cut short"},
		{name: "bad class", data: "\x7fELF\x03\x01\x01" + string(make([]byte, 60)), wantErr: "unknown class 3"},
		{name: "bad data", data: "\x7fELF\x02\x03\x01" + string(make([]byte, 60)), wantErr: "unknown data encoding 3"},
		{name: "4 GiB of program headers", data: hugeHeaders(), wantErr: "65535 program headers of 65535 bytes each"},
		{name: "header cut", data: "\x7fELF\x02\x01\x01" + string(make([]byte, 20)), wantErr: "ELF header at offset 0: file ends first"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Read(bytes.NewReader([]byte(tt.data)))
			if tt.notELF {
				if !errors.Is(err, ErrNotELF) {
					t.Fatalf("error %v, want ErrNotELF", err)
				}
				return
			}
			var fe *FormatError
			if !errors.As(err, &fe) || err.Error() != tt.wantErr {
				t.Fatalf("error %v, want a FormatError %q", err, tt.wantErr)
			}
		})
	}
}

// hugeHeaders is a 64-bit header claiming 65535 program headers of 65535
// bytes each: Read must refuse it before allocating 4 GiB.
func hugeHeaders() string {
	h := make([]byte, 64)
	copy(h, "\x7fELF\x02\x01\x01")
	h[16] = 3                 // ET_DYN
	h[32] = 64                // e_phoff
	h[54], h[55] = 0xff, 0xff // e_phentsize
	h[56], h[57] = 0xff, 0xff // e_phnum
	return string(h)
}

// TestReadTruncated cuts a real library at every length up to its dynamic
// section and past it: Read must never panic, and must either fail or
// agree with debug/elf on the same bytes.
func TestReadTruncated(t *testing.T) {
	lib, err := os.ReadFile("/usr/lib/x86_64-linux-gnu/libz.so.1")
	if err != nil {
		t.Skip(err)
	}
	for n := 0; n <= len(lib); n += 1 + n/64 {
		got, err := Read(bytes.NewReader(lib[:n]))
		if err != nil {
			continue
		}
		if want, ok := fromDebugElf(t, lib[:n]); ok && got != want {
			t.Errorf("cut at %d: Read %+v, debug/elf %+v", n, got, want)
		}
	}
}

// FuzzRead feeds Read anything: it must not panic nor allocate beyond its
// caps, and where it reads a file debug/elf also reads, the type and the
// interpreter must agree.
func FuzzRead(f *testing.F) {
	for _, p := range []string{"/usr/lib/x86_64-linux-gnu/libz.so.1", "/usr/bin/true"} {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b[:min(len(b), 8<<10)])
		}
	}
	f.Add([]byte("\x7fELF\x01\x02\x01"))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := Read(bytes.NewReader(data))
		if err != nil {
			return
		}
		if want, ok := fromDebugElf(t, data); ok && (got.Type != want.Type || got.Interp != want.Interp) {
			t.Errorf("Read %+v, debug/elf %+v", got, want)
		}
	})
}
