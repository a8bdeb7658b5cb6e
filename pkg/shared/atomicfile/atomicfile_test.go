package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
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

// TestWriteAt: the hook's writes into a container, through a directory
// descriptor (O_PATH, as the hook holds them), with O_TMPFILE and as on a
// file system without it. Whatever the image has at the name is replaced,
// links never followed; the file appears whole with its mode whatever the
// umask; the write leaves no file of its own, and files a killed write
// left do not get in its way.
func TestWriteAt(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	tests := []struct {
		name    string
		tree    func(t *testing.T, dir, outside string)
		wantErr string
	}{
		{name: "nothing there", tree: func(*testing.T, string, string) {}},
		{name: "a file there", tree: func(t *testing.T, dir, _ string) { write(t, filepath.Join(dir, "f"), "old") }},
		{name: "a link to a host file", tree: func(t *testing.T, dir, outside string) { symlink(t, outside, filepath.Join(dir, "f")) }},
		{name: "a dangling link", tree: func(t *testing.T, dir, _ string) { symlink(t, "/nonexistent", filepath.Join(dir, "f")) }},
		{name: "what killed writes left", tree: func(t *testing.T, dir, _ string) {
			write(t, filepath.Join(dir, "f"), "old")
			write(t, filepath.Join(dir, ".f.wsl-gpu-hook.7"), "half")                // the pid-named one
			write(t, filepath.Join(dir, ".f.wsl-gpu-hook-8000000000000001"), "half") // a linked one
		}},
		{name: "a directory there", tree: func(t *testing.T, dir, _ string) {
			if err := os.MkdirAll(filepath.Join(dir, "f", "x"), 0o755); err != nil {
				t.Fatal(err)
			}
		}, wantErr: "rename f: is a directory"},
	}
	for _, tmpfile := range []bool{true, false} {
		for _, tt := range tests {
			t.Run(fmt.Sprintf("%s, O_TMPFILE %v", tt.name, tmpfile), func(t *testing.T) {
				dir, outside := t.TempDir(), filepath.Join(t.TempDir(), "host-file")
				write(t, outside, "host")
				tt.tree(t, dir, outside)
				before := names(t, dir)
				d, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
				if err != nil {
					t.Fatal(err)
				}
				defer unix.Close(d)
				err = writer{mode: 0o644, owner: Keep, tmpfile: tmpfile}.write(d, "f", []byte("new"))
				if data, _ := os.ReadFile(outside); string(data) != "host" {
					t.Errorf("the write followed a link: the host file holds %q", data)
				}
				if tt.wantErr != "" {
					if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
						t.Errorf("err = %v, want %q", err, tt.wantErr)
					}
					if after := names(t, dir); after != before {
						t.Errorf("a failed write changed the directory: %s -> %s", before, after)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				fi, err := os.Lstat(filepath.Join(dir, "f"))
				data, _ := os.ReadFile(filepath.Join(dir, "f"))
				if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o644 || string(data) != "new" {
					t.Errorf("f: %v %v %q, want a regular file 0644 holding \"new\"", fi.Mode(), err, data)
				}
				if after, want := names(t, dir), strings.TrimSpace(strings.ReplaceAll(" "+before+" ", " f ", " ")+" f"); after != sorted(want) {
					t.Errorf("the directory holds %s, want %s", after, sorted(want))
				}
			})
		}
	}
}

// TestWriteAtInARemovedDirectory: a directory removed while the writer
// holds it fails the write with ENOENT, with O_TMPFILE (whose open says
// EPERM there) as without: the error callers tell users about.
func TestWriteAtInARemovedDirectory(t *testing.T) {
	for _, tmpfile := range []bool{true, false} {
		dir := filepath.Join(t.TempDir(), "d")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		d, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(d)
		if err := os.Remove(dir); err != nil {
			t.Fatal(err)
		}
		err = writer{mode: 0o644, owner: Keep, tmpfile: tmpfile}.write(d, "f", []byte("x"))
		if !errors.Is(err, unix.ENOENT) {
			t.Errorf("O_TMPFILE %v: %v, want ENOENT", tmpfile, err)
		}
	}
}

func TestNoTmpfile(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want bool
	}{
		{unix.EOPNOTSUPP, true}, {unix.EISDIR, true}, {unix.EINVAL, true},
		{unix.EROFS, false}, {unix.EACCES, false}, {unix.ENOSPC, false}, {nil, false},
	} {
		if got := noTmpfile(tt.err); got != tt.want {
			t.Errorf("noTmpfile(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

func write(t *testing.T, p, data string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, p string) {
	t.Helper()
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
	}
}

// names lists dir's entries, sorted, space-separated.
func names(t *testing.T, dir string) string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n []string
	for _, e := range ents {
		n = append(n, e.Name())
	}
	return strings.Join(n, " ")
}

func sorted(words string) string {
	w := strings.Fields(words)
	slices.Sort(w)
	return strings.Join(w, " ")
}

// TestLinkAtWithoutTheCapability: a hook in a container's own user
// namespace lacks CAP_DAC_READ_SEARCH where kernels before 6.10 look for
// it, the initial namespace, so it cannot link a descriptor itself
// (AT_EMPTY_PATH: ENOENT); it links through /proc. Kernels since 6.10 let
// the file's opener link it: the test opens it, then drops the capability
// (on one thread: capabilities are per thread, and the thread is discarded).
func TestLinkAtWithoutTheCapability(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: without CAP_DAC_READ_SEARCH every test here links through /proc")
	}
	dir := t.TempDir()
	errc := make(chan error)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread goes with the goroutine
		d, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			errc <- err
			return
		}
		defer unix.Close(d)
		tmp, err := unix.Openat(d, ".", unix.O_TMPFILE|unix.O_WRONLY|unix.O_CLOEXEC, 0o600)
		if err != nil {
			errc <- err
			return
		}
		defer unix.Close(tmp)
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var data [2]unix.CapUserData
		if err := unix.Capget(&hdr, &data[0]); err != nil {
			errc <- err
			return
		}
		data[0].Effective &^= 1 << unix.CAP_DAC_READ_SEARCH
		if err := unix.Capset(&hdr, &data[0]); err != nil {
			errc <- err
			return
		}
		if err := unix.Linkat(tmp, "", d, "probe", unix.AT_EMPTY_PATH); !errors.Is(err, unix.ENOENT) {
			errc <- fmt.Errorf("linkat AT_EMPTY_PATH without the capability: %v, want ENOENT", err)
			return
		}
		errc <- linkAt(tmp, d, "f")
	}()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if got := names(t, dir); got != "f" {
		t.Errorf("the directory holds %q, want f", got)
	}
}
