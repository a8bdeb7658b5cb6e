package dxg

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/simhost"
)

// A driver update while the VM runs: the folder file changes what the
// next driver store path query answers, for the named adapter only.
func TestFolderFileIsReadAtEveryQuery(t *testing.T) {
	p, err := simhost.Lookup("nvidia-laptop")
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "folders")
	h := newHost(Config{Profile: p, FolderFile: file})
	if got := h.storePath(1); got != p.Adapters[1].DriverStorePath {
		t.Errorf("no file yet: %q, want the profile's %q", got, p.Adapters[1].DriverStorePath)
	}
	os.WriteFile(file, []byte("1=nvltwi.inf_amd64_0000000000000001\n"), 0o644)
	want := `C:\Windows\System32\DriverStore\FileRepository\nvltwi.inf_amd64_0000000000000001`
	if got := h.storePath(1); got != want {
		t.Errorf("after the update: %q, want %q", got, want)
	}
	if got := h.storePath(0); got != p.Adapters[0].DriverStorePath {
		t.Errorf("adapter 0 changed too: %q", got)
	}
}
