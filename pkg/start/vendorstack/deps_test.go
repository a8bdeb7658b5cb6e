package vendorstack

import (
	"os/exec"
	"strings"
	"testing"
)

// The hook links this package and its probes (package stackprobe): a
// regexp there is compiled at every container start (~0.2 to 0.5 ms of
// package init on a test VM). The tests may use regexp to check the
// hand-written name checks; the packages must not.
func TestLinksNoRegexp(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".", "../../host/stackprobe").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if pkg == "regexp" {
			t.Error("vendorstack or stackprobe links regexp: write the name check as a function (see stackprobe's driNode)")
		}
	}
}
