package install

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// engine is the shape of Docker, Podman and Containerd.
type engine func(Options, bool) (*Plan, error)

// testOptions works in a fresh temporary tree.
func testOptions(t *testing.T) Options {
	t.Helper()
	o := DefaultOptions()
	o.Prefix = t.TempDir()
	return o
}

// place copies testdata/fixture to path under the prefix with mode 0640
// (not the default 0644, so a test sees whether the mode is kept); an
// empty fixture places nothing.
func place(t *testing.T, o Options, fixture, path string) []byte {
	t.Helper()
	if fixture == "" {
		return nil
	}
	data, err := os.ReadFile(filepath.Join("testdata", fixture))
	if err != nil {
		t.Fatal(err)
	}
	write(t, o, path, data)
	return data
}

func write(t *testing.T, o Options, path string, data []byte) {
	t.Helper()
	full := o.path(path)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(full, data, 0o640); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, o Options, target, path string) {
	t.Helper()
	full := o.path(path)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, full); err != nil {
		t.Fatal(err)
	}
}

// read returns a file under the prefix, nil when it does not exist.
func read(t *testing.T, o Options, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(o.path(path))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// tree lists everything under the prefix: file contents, link targets,
// directories, with modes, so a test can tell that nothing changed.
func tree(t *testing.T, o Options) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(o.Prefix, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(p, o.Prefix)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			out[rel] = "-> " + target
			return err
		case d.IsDir():
			out[rel] = "dir " + fi.Mode().String()
		default:
			data, err := os.ReadFile(p)
			out[rel] = fi.Mode().String() + " " + string(data)
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// run plans and applies, failing the test on any error.
func run(t *testing.T, o Options, e engine, uninstall bool) *Plan {
	t.Helper()
	p, err := e(o, uninstall)
	if err != nil {
		t.Fatalf("plan: %v", err)
	}
	if err := Apply(o, p); err != nil {
		t.Fatalf("apply: %v", err)
	}
	return p
}

// splitChange is where b differs from a: the common prefix and suffix
// lengths, and the differing middles.
func splitChange(a, b []byte) (removed, inserted string, prefix int) {
	for prefix < len(a) && prefix < len(b) && a[prefix] == b[prefix] {
		prefix++
	}
	suffix := 0
	for suffix < len(a)-prefix && suffix < len(b)-prefix && a[len(a)-1-suffix] == b[len(b)-1-suffix] {
		suffix++
	}
	return string(a[prefix : len(a)-suffix]), string(b[prefix : len(b)-suffix]), prefix
}
