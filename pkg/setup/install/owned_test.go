package install

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// packaged is a system as the .deb leaves it: the hook in /usr/bin, its
// wsl-gpu-runtime link and the hooks.d file, all owned by the package.
func packaged(t *testing.T) Options {
	t.Helper()
	o := testOptions(t)
	o.HookPath, o.BinDir = "/usr/bin/wsl-gpu-hook", "/usr/bin"
	owned := map[string]bool{"/usr/bin/wsl-gpu-hook": true, "/usr/bin/wsl-gpu-runtime": true, hooksDFile: true}
	o.Owner = func(p string) string {
		if owned[p] {
			return "wsl-gpu-hook"
		}
		return ""
	}
	if err := os.MkdirAll(o.path("/usr/bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("wsl-gpu-hook", o.path("/usr/bin/wsl-gpu-runtime")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(o.path(hooksDFile)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(o.path(hooksDFile), HooksD(o.HookPath, o.annotation()), 0o644); err != nil {
		t.Fatal(err)
	}
	return o
}

// TestPackageOwnedFilesStay: `uninstall docker podman` on a system where
// the package installed the link and the hooks.d file leaves both (dpkg
// -V would report them missing otherwise), and writes no backup into the
// package's directory.
func TestPackageOwnedFilesStay(t *testing.T) {
	o := packaged(t)
	if p := run(t, o, Podman, false); len(p.Changes) != 0 {
		t.Errorf("install podman over the package's identical file plans %v", p.Changes)
	}
	run(t, o, Docker, false)
	run(t, o, Docker, true)
	p := run(t, o, Podman, true)
	for _, path := range []string{"/usr/bin/wsl-gpu-runtime", hooksDFile} {
		if _, err := os.Lstat(o.path(path)); err != nil {
			t.Errorf("uninstall removed the package's %s: %v", path, err)
		}
	}
	entries, _ := os.ReadDir(filepath.Dir(o.path(hooksDFile)))
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"wsl-gpu-hook.json"}) {
		t.Errorf("the package's hooks.d dir holds %v, want only its own file", names)
	}
	if len(p.Warnings) == 0 {
		t.Error("uninstall podman does not say the package's file stays")
	}
}

// TestPodmanOverridesPackageFile: with another request annotation, install
// writes the admin's override in /etc (which masks the package's file)
// rather than editing the package's.
func TestPodmanOverridesPackageFile(t *testing.T) {
	o := packaged(t)
	o.Annotation = "example.com/gpus"
	pkgBefore := read(t, o, hooksDFile)
	p := run(t, o, Podman, false)
	if len(p.Changes) != 1 || p.Changes[0].Path != hooksDAdmin {
		t.Fatalf("plan = %v, want the admin file %s", p.Changes, hooksDAdmin)
	}
	if string(read(t, o, hooksDFile)) != string(pkgBefore) {
		t.Error("install edited the package's hooks.d file")
	}
	run(t, o, Podman, true)
	if _, err := os.Lstat(o.path(hooksDAdmin)); err == nil {
		t.Error("uninstall left the admin override")
	}
}
