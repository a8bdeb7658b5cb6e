package probed_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The probe and its cache fill a probed.Host; the decision reads it. Neither
// of the first two may need the decision package, so a change to the rules
// never rebuilds, or reaches into, how the host is read.
func TestTheProbeDoesNotImportTheDecision(t *testing.T) {
	const decision = "github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/gpuplan"
	for _, pkg := range []string{"../gpuhost", "../probecache"} {
		out, err := exec.Command("go", "list", "-deps", pkg).Output()
		if err != nil {
			t.Skipf("go list: %v", err)
		}
		for _, dep := range strings.Fields(string(out)) {
			if dep == decision {
				t.Errorf("%s imports %s: take probed.Host instead", strings.TrimPrefix(pkg, "../"), decision)
			}
		}
	}
}
