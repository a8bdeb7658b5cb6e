package mounts

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/ldcache"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/emulated"
)

// TestApplyAfterAKilledWrite: a start killed while it wrote the loader
// files left what such a write leaves behind. In the container's fresh pid
// namespace the next start's hook has the same pid, so nothing left may be
// in the way of the next write: the start after it writes the files, and
// a write that completes leaves no file of its own but its target.
func TestApplyAfterAKilledWrite(t *testing.T) {
	emulated.Skip(t, "openat2 with RESOLVE_IN_ROOT")
	root := t.TempDir()
	makeTree(t, root, "dir etc/ld.so.conf.d", "cache etc/ld.so.cache")
	pid := strconv.Itoa(os.Getpid())
	// What the hook wrote its temporary files as, before they were
	// unnamed: "." + name + ".wsl-gpu-hook." + pid.
	for _, p := range []string{"etc/.ld.so.cache.wsl-gpu-hook." + pid, "etc/ld.so.conf.d/.wsl-gpu-hook.conf.wsl-gpu-hook." + pid} {
		if err := os.WriteFile(filepath.Join(root, p), []byte("half"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	steps := []Step{
		{Kind: File, Target: LdconfFile, Data: []byte("/usr/lib/wsl/lib\n")},
		{Kind: Ldcache, Target: LdcacheFile, Entries: []ldcache.Entry{{Key: "libcuda.so.1", Path: "/usr/lib/wsl/lib/libcuda.so.1", Flags: ldcache.FlagX8664Libc6}}},
	}
	if err := Apply(root, steps, quietLog()); err != nil {
		t.Fatalf("the start after a killed one: %v", err)
	}
	assertFile(t, filepath.Join(root, LdconfFile), "/usr/lib/wsl/lib\n")
	assertLdcache(t, filepath.Join(root, LdcacheFile), "libcuda.so.1", "/usr/lib/wsl/lib/libcuda.so.1")
	for _, dir := range []string{"etc", "etc/ld.so.conf.d"} {
		ents, err := os.ReadDir(filepath.Join(root, dir))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), ".") && !strings.HasSuffix(e.Name(), ".wsl-gpu-hook."+pid) {
				t.Errorf("the write left %s/%s", dir, e.Name())
			}
		}
	}
}
