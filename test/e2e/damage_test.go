package e2e

import (
	"os"
	"path/filepath"
	"testing"
)

// The ways the fault tests (TestFaults, TestDoctor) break a copy of the
// Windows-side host tree.

// replace swaps a path of the host copy for what with makes there.
func replace(p string, with func(string) error) func(t *testing.T, host string) {
	return func(t *testing.T, host string) {
		t.Helper()
		p := filepath.Join(host, p)
		if err := os.RemoveAll(p); err != nil {
			t.Fatal(err)
		}
		if err := with(p); err != nil {
			t.Fatal(err)
		}
	}
}

func asFile(p string) error { return os.WriteFile(p, []byte("not a directory\n"), 0o644) }
func gone(string) error     { return nil }
func toRoot(p string) error { return os.Symlink("/", p) }

// rootOnly leaves a path of the host copy as it is but mode 0700: root
// could read it, a container's ordinary user could not.
func rootOnly(p string) func(t *testing.T, host string) {
	return func(t *testing.T, host string) {
		t.Helper()
		if err := os.Chmod(filepath.Join(host, p), 0o700); err != nil {
			t.Fatal(err)
		}
	}
}
