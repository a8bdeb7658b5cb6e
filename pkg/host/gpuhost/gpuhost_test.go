package gpuhost

import (
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/devnode"
)

func TestLdcacheEntries(t *testing.T) {
	got, err := LdcacheEntries(t.TempDir())
	if err != nil || got == nil || len(got) != 0 {
		t.Fatalf("LdcacheEntries(empty dir) = %v, %v; want an empty, non-nil list", got, err)
	}
	missing := filepath.Join(t.TempDir(), "lib")
	if _, err := LdcacheEntries(missing); err == nil || !strings.HasPrefix(err.Error(), "scan "+missing+" for the loader cache: ") || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("LdcacheEntries(missing) error = %v", err)
	}
}

// A character device that is not dxg fails at enumeration, before the
// driver store is read.
func TestProbeNotDxg(t *testing.T) {
	node, err := devnode.Stat("/dev/null")
	if err != nil {
		t.Fatal(err)
	}
	h, _, err := Probe(node, Options{LibDir: t.TempDir(), DriversDir: t.TempDir(), Ldcache: true})
	if err == nil || h.Inventory != nil {
		t.Fatalf("Probe(/dev/null) = %+v, %v; want an enumeration error", h, err)
	}
}

func TestListNotDxg(t *testing.T) {
	for _, dev := range []string{"/dev/null", filepath.Join(t.TempDir(), "dxg")} {
		inv, err := List(dev, Options{LibDir: t.TempDir(), DriversDir: t.TempDir()})
		if err == nil || inv != nil {
			t.Errorf("List(%s) = %+v, %v; want an enumeration error", dev, inv, err)
		}
	}
}
