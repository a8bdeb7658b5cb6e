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

// An adapter removed while the VM runs: the removed file hides it from the
// next enumeration, and it returns when the line goes.
func TestRemovedFileIsReadAtEveryEnumeration(t *testing.T) {
	p, err := simhost.Lookup("nvidia-laptop")
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "removed")
	k := &Kernel{host: newHost(Config{Profile: p, RemovedFile: file})}
	if got := k.enumerable(true); len(got) != 2 {
		t.Errorf("no file yet: %v, want both adapters", got)
	}
	os.WriteFile(file, []byte("1\n"), 0o644)
	if got := k.enumerable(true); len(got) != 1 || got[0] != 0 {
		t.Errorf("adapter 1 removed: %v, want [0]", got)
	}
	os.WriteFile(file, nil, 0o644)
	if got := k.enumerable(true); len(got) != 2 {
		t.Errorf("adapter 1 back: %v, want both", got)
	}
}
