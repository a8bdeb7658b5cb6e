package smallfile

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
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
