package probecache_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/probecache"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/ldcache"
)

const sonamesLib = "/usr/lib/wsl/lib"

var (
	cudaID = ldcache.FileID{Ino: 41, Size: 25_000_000, Mtime: 1_700_000_000_123_456_700, Ctime: 1_700_000_000_123_456_800}
	dxID   = ldcache.FileID{Ino: 42, Size: 900_000, Mtime: 1_600_000_000_000_000_100, Ctime: 1_600_000_000_000_000_200}
	smiID  = ldcache.FileID{Ino: 43, Size: 700_000, Mtime: 1_600_000_000_000_000_300, Ctime: 1_600_000_000_000_000_400}
)

// keepAll gives memo one scan's worth of files.
func keepAll(m *probecache.Sonames) {
	m.Keep("libcuda.so.1", cudaID, "libcuda.so.1", true)
	m.Keep("libdxcore.so", dxID, "", true)
	m.Keep("libnvidia-smi.so", smiID, "", false)
}

// TestSonames: what one scan kept answers the next boot's scan for the
// same name and FileID only; the file is rewritten only when the scan
// found something else (a file read anew, a file gone).
func TestSonames(t *testing.T) {
	path := probecache.SonamesPath(filepath.Join(t.TempDir(), "cache"), sonamesLib)
	m, err := probecache.LoadSonames(path, sonamesLib)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("no file: %v", err)
	}
	keepAll(m)
	if !m.Changed() {
		t.Fatal("a first scan changed nothing")
	}
	// The directory is the package's: Save never makes it.
	if err := m.Save(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("save without the directory: %v, want it not to exist", err)
	}
	if _, err := os.Stat(filepath.Dir(path)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("save made the directory: %v", err)
	}
	if err := os.Mkdir(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := m.Save(path); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o644 {
		t.Fatalf("saved file: %v %v", fi, err)
	}
	m, err = probecache.LoadSonames(path, sonamesLib)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name       string
		id         ldcache.FileID
		soname     string
		lib, known bool
	}{
		{"libcuda.so.1", cudaID, "libcuda.so.1", true, true},
		{"libdxcore.so", dxID, "", true, true},
		{"libnvidia-smi.so", smiID, "", false, true},
		{"libcuda.so.1", dxID, "", false, false}, // another file under the name
		{"libcuda.so", cudaID, "", false, false}, // the same file under another name
		{"libcuda.so.1", ldcache.FileID{Ino: 41, Size: 25_000_000, Mtime: cudaID.Mtime, Ctime: cudaID.Ctime + 1}, "", false, false},
	} {
		soname, lib, known := m.Soname(c.name, c.id)
		if soname != c.soname || lib != c.lib || known != c.known {
			t.Errorf("Soname(%s, %+v) = %q, %v, %v; want %q, %v, %v", c.name, c.id, soname, lib, known, c.soname, c.lib, c.known)
		}
	}
	keepAll(m)
	if m.Changed() {
		t.Error("the same scan again changed the memo")
	}
	for _, c := range []struct {
		name string
		scan func(m *probecache.Sonames)
	}{
		{"a file gone", func(m *probecache.Sonames) {
			m.Keep("libcuda.so.1", cudaID, "libcuda.so.1", true)
			m.Keep("libdxcore.so", dxID, "", true)
		}},
		{"a file replaced", func(m *probecache.Sonames) {
			m.Keep("libcuda.so.1", ldcache.FileID{Ino: 99, Size: 1}, "libcuda.so.1", true)
			m.Keep("libdxcore.so", dxID, "", true)
			m.Keep("libnvidia-smi.so", smiID, "", false)
		}},
		{"a file added", func(m *probecache.Sonames) {
			keepAll(m)
			m.Keep("libd3d12.so", ldcache.FileID{Ino: 7}, "", true)
		}},
	} {
		m, err := probecache.LoadSonames(path, sonamesLib)
		if err != nil {
			t.Fatal(err)
		}
		c.scan(m)
		if !m.Changed() {
			t.Errorf("%s: not changed", c.name)
		}
	}
}

// TestHostileSonames: a file a scan could not have written, or one that is
// not this user's alone, is not used (a miss that is not the quiet one),
// and the next Save replaces it with one that answers.
func TestHostileSonames(t *testing.T) {
	saved := func(keep func(m *probecache.Sonames)) func(t *testing.T, path string) {
		return func(t *testing.T, path string) {
			m, _ := probecache.LoadSonames("/nonexistent", sonamesLib)
			keep(m)
			if err := m.Save(path); err != nil {
				t.Fatal(err)
			}
		}
	}
	tests := append(framingCases(2), []hostileCase{
		{"a count longer than the file", raw(func(data []byte) []byte {
			n := 8 + 4 + 4 + len(sonamesLib)
			return append(data[:n], 0xff, 0xff, 0xff, 0x0f)
		})},
		{"made for another lib dir", func(t *testing.T, path string) {
			m, _ := probecache.LoadSonames("/nonexistent", "/usr/lib/wsl/lib2")
			keepAll(m)
			if err := m.Save(path); err != nil {
				t.Fatal(err)
			}
		}},
		{"a name with a slash", saved(func(m *probecache.Sonames) { m.Keep("../lib/libcuda.so.1", cudaID, "libcuda.so.1", true) })},
		{"a dot-dot name", saved(func(m *probecache.Sonames) { m.Keep("..", cudaID, "libcuda.so.1", true) })},
		{"an empty name", saved(func(m *probecache.Sonames) { m.Keep("", cudaID, "libcuda.so.1", true) })},
		{"a name twice", saved(func(m *probecache.Sonames) {
			keepAll(m)
			m.Keep("libcuda.so.1", dxID, "libcuda.so.2", true)
		})},
		{"a SONAME with a NUL", saved(func(m *probecache.Sonames) { m.Keep("libcuda.so.1", cudaID, "libcuda.so.1\x00x", true) })},
		{"a SONAME longer than a scan reads", saved(func(m *probecache.Sonames) {
			m.Keep("libcuda.so.1", cudaID, strings.Repeat("x", 4096), true)
		})},
		{"a SONAME of no library", saved(func(m *probecache.Sonames) { m.Keep("libcuda.so.1", cudaID, "libcuda.so.1", false) })},
	}...)
	tests = append(tests, fileRuleCases...)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := probecache.SonamesPath(t.TempDir(), sonamesLib)
			m, _ := probecache.LoadSonames(path, sonamesLib)
			keepAll(m)
			if err := m.Save(path); err != nil {
				t.Fatal(err)
			}
			tt.do(t, path)
			m, err := probecache.LoadSonames(path, sonamesLib)
			if err == nil || errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("load: %v; want a refusal", err)
			}
			if _, _, known := m.Soname("libcuda.so.1", cudaID); known {
				t.Fatal("a refused file answered")
			}
			keepAll(m)
			if !m.Changed() {
				t.Fatal("a scan after a refused file would not rewrite it")
			}
			if err := m.Save(path); err != nil {
				t.Fatalf("replace: %v", err)
			}
			m, err = probecache.LoadSonames(path, sonamesLib)
			if _, _, known := m.Soname("libcuda.so.1", cudaID); err != nil || !known {
				t.Fatalf("after replacing: %v, known %v", err, known)
			}
		})
	}
}
