package mounts

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestReadRegular(t *testing.T) {
	dir := t.TempDir()
	sizes := map[string]int{"empty": 0, "small": 17, "page": 4096, "page+1": 4097, "cache": 35688}
	for name, n := range sizes {
		if err := os.WriteFile(filepath.Join(dir, name), bytes.Repeat([]byte{'x'}, n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("small", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	dfd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(dfd)

	for name, n := range sizes {
		t.Run(name, func(t *testing.T) {
			data, existed, err := readRegular(dfd, name)
			if err != nil || !existed || len(data) != n {
				t.Fatalf("got %d bytes, existed %v, %v; want %d bytes", len(data), existed, err, n)
			}
		})
	}
	t.Run("absent and link: as if absent", func(t *testing.T) {
		for _, name := range []string{"absent", "link"} {
			if data, existed, err := readRegular(dfd, name); data != nil || existed || err != nil {
				t.Errorf("%s: got %q, %v, %v; want nothing", name, data, existed, err)
			}
		}
	})
	t.Run("fifo and directory: refused without blocking", func(t *testing.T) {
		for _, name := range []string{"fifo", "sub"} {
			_, _, err := readRegular(dfd, name)
			if err == nil || !strings.Contains(err.Error(), "is not a regular file in the image") {
				t.Errorf("%s: error %v, want not a regular file", name, err)
			}
		}
	})
	t.Run("longer than fstat says", func(t *testing.T) {
		// procfs files have size 0 and content: the read must not stop
		// at the size fstat reported.
		proc, err := unix.Open("/proc/self", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Skip(err)
		}
		defer unix.Close(proc)
		data, existed, err := readRegular(proc, "status")
		if err != nil || !existed || !bytes.HasPrefix(data, []byte("Name:")) || !bytes.HasSuffix(data, []byte("\n")) {
			t.Fatalf("got %q, existed %v, %v; want all of /proc/self/status", data, existed, err)
		}
	})
}
