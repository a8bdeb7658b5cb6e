package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/mounts"
)

// TestCDIStepsSkipOnlyRealBinds: the CDI hook skips a bind only when the
// source directory itself is at the target. An image cannot fake that:
// a link to the host path resolves inside the rootfs, and an empty
// directory of its own is another inode.
func TestCDIStepsSkipOnlyRealBinds(t *testing.T) {
	host := t.TempDir()
	src := filepath.Join(host, "drivers", "nv")
	rootfs := filepath.Join(t.TempDir(), "rootfs")
	for _, d := range []string{src, filepath.Join(rootfs, "usr/lib/wsl/drivers/own")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The image's link named like the folder, pointing at the host path.
	if err := os.Symlink(src, filepath.Join(rootfs, "usr/lib/wsl/drivers/nv")); err != nil {
		t.Fatal(err)
	}
	// The rootfs itself stands in for a target that is the source (what a
	// bind mount shows): target "/" of rootfs is rootfs.
	plan := []mounts.Step{
		{Kind: mounts.Bind, Source: src, Target: "/usr/lib/wsl/drivers/nv"},
		{Kind: mounts.Bind, Source: src, Target: "/usr/lib/wsl/drivers/own"},
		{Kind: mounts.Bind, Source: src, Target: "/usr/lib/wsl/drivers/missing"},
		{Kind: mounts.Bind, Source: rootfs, Target: "/"},
		{Kind: mounts.File, Target: mounts.LdconfFile},
	}
	steps, skipped := cdiSteps(plan, rootfs)
	if len(skipped) != 1 || skipped[0].Target != "/" {
		t.Errorf("skipped %v, want only the bind whose target is its source", skipped)
	}
	if len(steps) != 4 {
		t.Errorf("steps %v", steps)
	}
}
