package smallfile

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

func TestRead(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	big := bytes.Repeat([]byte("x"), 10000)
	for _, tt := range []struct {
		name  string
		path  string
		limit int
		want  []byte
		err   error
	}{
		{"empty", write("empty", nil), 10, []byte{}, nil},
		{"small", write("small", []byte("hello")), 10, []byte("hello"), nil},
		{"at the limit", write("limit", big), len(big), big, nil},
		{"one over", write("over", big), len(big) - 1, nil, ErrTooLarge},
		{"missing", filepath.Join(dir, "none"), 10, nil, fs.ErrNotExist},
		{"directory", dir, 10, nil, errors.New("any")},
		// /proc files report size 0 and are read to their end.
		{"proc", "/proc/self/status", 1 << 20, nil, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Read(tt.path, tt.limit)
			switch {
			case tt.err == nil && err != nil:
				t.Fatalf("Read: %v", err)
			case tt.err != nil && err == nil:
				t.Fatalf("Read = %d bytes, want error %v", len(got), tt.err)
			case tt.err != nil:
				var pe *fs.PathError
				if !errors.As(err, &pe) || pe.Path != tt.path {
					t.Errorf("error %v does not name %s", err, tt.path)
				}
				if tt.err.Error() != "any" && !errors.Is(err, tt.err) {
					t.Errorf("error %v, want %v", err, tt.err)
				}
				return
			}
			if tt.want == nil {
				want, _ := os.ReadFile(tt.path)
				// /proc/self/status is this process's at the time: compare a
				// stable line.
				if !bytes.HasPrefix(got, want[:bytes.IndexByte(want, '\n')+1]) {
					t.Errorf("Read = %q..., want %q...", got[:min(len(got), 40)], want[:40])
				}
				return
			}
			if !bytes.Equal(got, tt.want) {
				t.Errorf("Read = %d bytes %q..., want %d bytes", len(got), got[:min(len(got), 20)], len(tt.want))
			}
		})
	}
}

// TestReadVetted: the vetting function sees the open file's stat and its
// refusal is the error, with nothing read; the flags reach open(2), so a
// link is refused with O_NOFOLLOW and a FIFO with no writer does not block
// with O_NONBLOCK.
func TestReadVetted(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("cached"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(file, link); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	refused := errors.New("refused")
	regular := func(st *unix.Stat_t) error {
		if st.Mode&unix.S_IFMT != unix.S_IFREG {
			return refused
		}
		return nil
	}
	nofollow := unix.O_NOFOLLOW | unix.O_NONBLOCK
	for _, tt := range []struct {
		name  string
		path  string
		flags int
		vet   func(*unix.Stat_t) error
		want  string
		err   error
	}{
		{"accepted", file, nofollow, regular, "cached", nil},
		{"vet sees the size", file, 0, func(st *unix.Stat_t) error {
			if st.Size != 6 {
				return fmt.Errorf("size %d", st.Size)
			}
			return nil
		}, "cached", nil},
		{"vet refuses", file, 0, func(*unix.Stat_t) error { return refused }, "", refused},
		{"link with O_NOFOLLOW", link, nofollow, regular, "", unix.ELOOP},
		{"link followed without", link, 0, regular, "cached", nil},
		{"fifo refused, not waited on", fifo, nofollow, regular, "", refused},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ReadVetted(tt.path, 100, tt.flags, tt.vet)
			if tt.err != nil {
				if !errors.Is(err, tt.err) {
					t.Fatalf("ReadVetted = %q, %v; want error %v", got, err, tt.err)
				}
				return
			}
			if err != nil || string(got) != tt.want {
				t.Fatalf("ReadVetted = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}
