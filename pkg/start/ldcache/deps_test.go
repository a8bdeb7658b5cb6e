package ldcache

import (
	"os/exec"
	"strings"
	"testing"
)

// The hook scans the lib dir at every container start: what this package
// links runs its package init there too. debug/elf brings compress/flate,
// internal/zstd and debug/dwarf (~0.25 ms of init on a test VM), regexp
// compiles at init wherever it is used; the tests use them, the package
// must not.
func TestLinksNoDebugElf(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		switch pkg {
		case "debug/elf", "debug/dwarf", "compress/flate", "internal/zstd", "regexp":
			t.Errorf("ldcache links %s", pkg)
		}
	}
}
