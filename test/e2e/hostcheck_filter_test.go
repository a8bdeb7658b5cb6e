package e2e

import (
	"os"
	"path/filepath"
	"testing"
)

// TestOtherRunMount guards the one exception to the strict host mount
// check: mounts tests make in other runs' work dirs, never the run's own.
func TestOtherRunMount(t *testing.T) {
	tmp := os.TempDir()
	own := filepath.Join(tmp, scratchPrefix+"1", "c-7")
	tests := []struct {
		name  string
		mp    string
		other bool
	}{
		{name: "another test's tmpfs root", mp: filepath.Join(tmp, scratchPrefix+"1", "c-8/bundle/rootfs"), other: true},
		{name: "another checkout's run", mp: filepath.Join(tmp, scratchPrefix+"2", "c-1/bundle/rootfs"), other: true},
		{name: "the run's own rootfs", mp: filepath.Join(own, "bundle/rootfs")},
		{name: "the run's own dir", mp: own},
		{name: "a WSL path on the host", mp: "/usr/lib/wsl/lib"},
		{name: "a look-alike outside the temp dir", mp: "/srv/" + scratchPrefix + "1/x"},
		{name: "a sibling of the scratch dirs", mp: filepath.Join(tmp, "other")},
		{name: "an engine test's rootfs", mp: filepath.Join(tmp, "wsl-gpu-engines-5/rootfs"), other: true},
		{name: "make bench-start's overlay", mp: "/var/tmp/wsl-gpu-bench-start-9/runs/bench-hook-1/bundle/rootfs", other: true},
		{name: "a look-alike in /var/tmp", mp: "/var/tmp/wsl-gpu-bench-other/x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := otherRunMount(tt.mp, own); got != tt.other {
				t.Errorf("otherRunMount(%s) = %v, want %v", tt.mp, got, tt.other)
			}
		})
	}
}
