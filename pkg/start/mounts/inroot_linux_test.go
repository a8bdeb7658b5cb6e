package mounts

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/emulated"
	wsltree "github.com/wsl-gpu-hook/wsl-gpu-hook/test/fixture"
)

// TestInRoot checks the confined lookups against hostile trees: whatever
// the image's links say, a handle names a directory inside the root, and
// nothing is created outside it.
func TestInRoot(t *testing.T) {
	emulated.Skip(t, "openat2 with RESOLVE_IN_ROOT")
	tests := []struct {
		name  string
		tree  []string // fixture.Tree lines; OUT is the outside dir's absolute path
		path  string
		want  string // the directory the handle must name, relative to root; "" for an error
		mkdir bool   // mkdirAllInRoot, else openInRoot
	}{
		{name: "existing", tree: []string{"dir etc/ld.so.conf.d"}, path: "/etc/ld.so.conf.d", want: "etc/ld.so.conf.d", mkdir: true},
		{name: "created", tree: []string{"dir etc"}, path: "/etc/ld.so.conf.d/x", want: "etc/ld.so.conf.d/x", mkdir: true},
		{name: "created from the root", path: "/usr/lib/wsl", want: "usr/lib/wsl", mkdir: true},
		{name: "link inside the root is followed", tree: []string{"dir usr/bin", "symlink bin usr/bin"}, path: "/bin", want: "usr/bin", mkdir: true},
		{name: "absolute link stays in the root", tree: []string{"dir real", "symlink etc /real"}, path: "/etc/x", want: "real/x", mkdir: true},
		{name: "dot-dot link stays in the root", tree: []string{"dir real", "symlink etc ../../../../real"}, path: "/etc/x", want: "real/x", mkdir: true},
		{name: "link to the host's dir is not followed out", tree: []string{"symlink etc OUT"}, path: "/etc/ld.so.conf.d", mkdir: true},
		{name: "dangling link is not replaced or followed", tree: []string{"symlink etc /nowhere/x"}, path: "/etc/ld.so.conf.d", mkdir: true},
		{name: "file in the way", tree: []string{"file dev"}, path: "/dev", mkdir: true},
		{name: "open through a link", tree: []string{"dir usr/lib64", "symlink lib64 usr/lib64"}, path: "/lib64", want: "usr/lib64"},
		{name: "open does not leave the root", tree: []string{"symlink lib64 OUT"}, path: "/lib64/x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := t.TempDir()
			root, outside := filepath.Join(base, "root"), filepath.Join(base, "outside")
			for _, d := range []string{root, outside} {
				if err := os.Mkdir(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			for _, l := range tt.tree {
				wsltree.Tree(t, root, strings.ReplaceAll(l, "OUT", outside))
			}
			rootFd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(rootFd)
			var h int
			if tt.mkdir {
				h, err = mkdirAllInRoot(rootFd, tt.path)
			} else {
				h, err = openInRoot(rootFd, tt.path, unix.O_PATH)
			}
			if ents, _ := os.ReadDir(outside); len(ents) != 0 {
				t.Errorf("created %s outside the root", ents[0].Name())
			}
			if tt.want == "" {
				if err == nil {
					unix.Close(h)
					t.Fatalf("got a handle, want an error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(h)
			var got, want unix.Stat_t
			if err := unix.Fstat(h, &got); err != nil {
				t.Fatal(err)
			}
			if err := unix.Stat(filepath.Join(root, tt.want), &want); err != nil {
				t.Fatal(err)
			}
			if got.Ino != want.Ino || got.Dev != want.Dev {
				t.Errorf("handle names inode %d, want %s (inode %d)", got.Ino, tt.want, want.Ino)
			}
		})
	}
}
