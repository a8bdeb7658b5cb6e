package hookroot

import (
	"testing"

	"golang.org/x/sys/unix"
)

// BenchmarkOpen: what proving the root filesystem adds to a start. "path"
// is what Apply did alone before (open the root filesystem by path, close
// it); "Open" is the proof, on a directory it refuses after gathering
// every fact (an accepted one gathers the same); the rest are its system
// calls one by one.
func BenchmarkOpen(b *testing.B) {
	dir, bundle := b.TempDir(), b.TempDir()
	b.Chdir(dir)
	b.Run("path", func(b *testing.B) {
		for b.Loop() {
			fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
			if err != nil {
				b.Fatal(err)
			}
			unix.Close(fd)
		}
	})
	b.Run("Open", func(b *testing.B) {
		for b.Loop() {
			if r, err := Open(".", WorkingDir, bundle); err == nil {
				r.Close()
			}
		}
	})
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Close(fd)
	b.Run("getcwd", func(b *testing.B) {
		for b.Loop() {
			unix.Getwd()
		}
	})
	b.Run("statx mount root", func(b *testing.B) {
		var stx unix.Statx_t
		for b.Loop() {
			unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_INO, &stx)
		}
	})
	for _, p := range []string{"/", bundle, "/proc/thread-self/ns/mnt", "/proc/self/ns/mnt", "/proc/1/ns/mnt"} {
		b.Run("stat "+p, func(b *testing.B) {
			for b.Loop() {
				stat(p)
			}
		})
	}
}
