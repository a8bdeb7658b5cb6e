package wsl

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestBeside(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name string, mode os.FileMode) string {
		p := filepath.Join(bin, name)
		if err := os.WriteFile(p, nil, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	hook := write(HookName, 0o755)
	// A link elsewhere (nvidia-container-runtime-hook, a PATH entry)
	// finds the binaries beside its target.
	link := filepath.Join(dir, NvidiaHookName)
	if err := os.Symlink(hook, link); err != nil {
		t.Fatal(err)
	}
	if _, err := CtlBeside(link); err == nil || !strings.Contains(err.Error(), "no wsl-gpu-ctl next to "+link) {
		t.Fatalf("CtlBeside without ctl: %v", err)
	}
	write(CtlName, 0o644)
	if _, err := CtlBeside(link); err == nil || !strings.Contains(err.Error(), "is not an executable file") {
		t.Fatalf("CtlBeside of a non-executable: %v", err)
	}
	if err := os.Chmod(filepath.Join(bin, CtlName), 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := CtlBeside(link); err != nil || got != filepath.Join(bin, CtlName) {
		t.Fatalf("CtlBeside = %q, %v", got, err)
	}
	if got, err := HookBeside(filepath.Join(bin, CtlName)); err != nil || got != hook {
		t.Fatalf("HookBeside = %q, %v", got, err)
	}
}

func TestIsCtlCommand(t *testing.T) {
	for cmd, want := range map[string]bool{"info": true, "doctor": true, "cdi": true, "install": true, "uninstall": true,
		"prestart": false, "cdi-hook": false, "runtime": false, "version": false} {
		if IsCtlCommand(cmd) != want {
			t.Errorf("IsCtlCommand(%q) = %v", cmd, !want)
		}
	}
}
