package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "sub", "f.json")
	if err := Write(p, []byte("one"), 0o640, Keep); err != nil {
		t.Fatal(err)
	}
	check := func(want string, mode fs.FileMode) {
		t.Helper()
		data, err := os.ReadFile(p)
		fi, serr := os.Stat(p)
		if err != nil || serr != nil || string(data) != want || fi.Mode().Perm() != mode {
			t.Fatalf("%s: %q %v, mode %v %v; want %q %v", p, data, err, fi.Mode().Perm(), serr, want, mode)
		}
		ents, _ := os.ReadDir(filepath.Dir(p))
		if len(ents) != 1 {
			t.Fatalf("temporary files left: %v", ents)
		}
	}
	check("one", 0o640)
	if err := os.Chmod(p, 0o604); err != nil {
		t.Fatal(err)
	}
	if err := Replace(p, []byte("two")); err != nil {
		t.Fatal(err)
	}
	check("two", 0o604)
	if err := Replace(filepath.Join(dir, "none"), nil); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Replace of a missing file: %v", err)
	}
	// A directory in the way: the write fails and leaves nothing behind.
	d := filepath.Join(dir, "d")
	if err := os.MkdirAll(filepath.Join(d, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := Write(d, []byte("x"), 0o644, Keep); err == nil {
		t.Fatal("Write over a directory succeeded")
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 2 { // sub and d
		t.Fatalf("entries after a failed write: %v", ents)
	}
}
