package doctor

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/probecache"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/wsl"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/ldcache"
)

// TestFirstStart: doctor says how much of the lib dir the first start
// after a boot will read, from the SONAMEs a start kept, and writes
// nothing itself.
func TestFirstStart(t *testing.T) {
	h := newHost(t)
	path := probecache.SonamesPath(h.opt.SonameCache, h.opt.LibDir)
	want(t, h.run(), "first start", Warn, h.opt.SonameCache+" does not exist: the first container start after each boot reads every library",
		"sudo mkdir -m 0755 "+h.opt.SonameCache)
	if _, err := os.Stat(h.opt.SonameCache); !os.IsNotExist(err) {
		t.Fatalf("doctor made %s: %v", h.opt.SonameCache, err)
	}
	if err := os.Mkdir(h.opt.SonameCache, 0o755); err != nil {
		t.Fatal(err)
	}
	want(t, h.run(), "first start", OK, "no SONAMEs kept in "+h.opt.SonameCache+" yet", "")

	// What a container start keeps.
	memo, _ := probecache.LoadSonames(path, h.opt.LibDir)
	if _, err := ldcache.ScanDirMemo(h.opt.LibDir, wsl.LibDir, memo); err != nil {
		t.Fatal(err)
	}
	if err := memo.Save(path); err != nil {
		t.Fatal(err)
	}
	kept, _ := os.ReadFile(path)
	want(t, h.run(), "first start", OK, "knows all 18 libraries of "+h.opt.LibDir+" as they are", "")

	// A driver update changes a library in place. The fixture's libraries
	// are mode 0555, as WSL's are: made writable for the change (root
	// writes them anyway; any other user could not), then as they were.
	lib := filepath.Join(h.opt.LibDir, "libcuda.so.1.1")
	if err := os.Chmod(lib, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(lib, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteString("an update")
	if err := errors.Join(err, f.Close(), os.Chmod(lib, 0o555)); err != nil {
		t.Fatal(err)
	}
	want(t, h.run(), "first start", OK, "knows 17 of the 18 libraries of "+h.opt.LibDir+" as they are: the first container start after a boot reads the other 1", "")
	// A library new to the file.
	if err := os.WriteFile(filepath.Join(h.opt.LibDir, "libnew.so.1"), []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	want(t, h.run(), "first start", OK, "knows 17 of the 19 libraries of "+h.opt.LibDir+" as they are: the first container start after a boot reads the other 2", "")
	if now, _ := os.ReadFile(path); string(now) != string(kept) {
		t.Error("doctor rewrote the SONAME file")
	}

	if err := os.WriteFile(path, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	want(t, h.run(), "first start", Warn, "not a SONAME file: the first container start after a boot reads every library", "")

	h.opt.SonameCache, h.opt.NoSonameCache = "", true
	want(t, h.run(), "first start", OK, "soname_cache is \"\" in the configuration", "")
}
