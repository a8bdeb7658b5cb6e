package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/fixture"
)

// TestRootfsFaults gives the hook a root file system it cannot write: one
// on a full file system and one mounted read-only. The image carries a
// glibc loader so the hook has files to write. The start must fail with the
// hook's one line naming the cause, after undoing its mounts (runBox checks
// the host), and leave no file of its own in the image.
func TestRootfsFaults(t *testing.T) {
	env(t)
	tests := []struct {
		name    string
		mount   func(t *testing.T, rootfs string)
		wantErr string
	}{
		{
			name: "full disk",
			mount: func(t *testing.T, rootfs string) {
				// Move the image onto a tiny tmpfs and fill it.
				tmp := filepath.Join(t.TempDir(), "img")
				if err := os.Rename(rootfs, tmp); err != nil {
					t.Fatal(err)
				}
				os.Mkdir(rootfs, 0o755)
				mountOrFail(t, "tmpfs", rootfs, "tmpfs", 0, "size=8m")
				copyTree(t, tmp, rootfs)
				fill := filepath.Join(rootfs, "fill")
				f, err := os.Create(fill)
				if err != nil {
					t.Fatal(err)
				}
				buf := make([]byte, 64<<10)
				for {
					if _, err := f.Write(buf); err != nil {
						break
					}
				}
				f.Close()
			},
			wantErr: "the container's root filesystem is full: free space in the image's storage",
		},
		{
			name: "read-only rootfs",
			mount: func(t *testing.T, rootfs string) {
				mountOrFail(t, rootfs, rootfs, "", unix.MS_BIND, "")
				mountOrFail(t, "", rootfs, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, "")
			},
			wantErr: "read-only",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := runBox(t, box{
				image: imageBusybox,
				sim:   &simulation{profile: "nvidia-laptop"},
				hook:  hookConfig,
				env:   []string{"WSL_GPU_DEVICES=all"},
				prepare: func(t *testing.T, rootfs string) {
					fixture.Tree(t, rootfs, "dir etc", "dir proc", "dir sys", "dir dev", "dir usr/lib/wsl/lib",
						"dir usr/lib/wsl/drivers/iigd_dch.inf_amd64_ba2ab4a3e0e0b2ea", "dir usr/lib/wsl/drivers/nvltwi.inf_amd64_7b2a5c1c4e6f8d90",
						"dir usr/bin", "exe lib64/ld-linux-x86-64.so.2 \x7fELF")
					tt.mount(t, rootfs)
				},
				checks: []check{{"ran", "echo ran"}},
			})
			got, ok := hookStderr(o.stderr)
			if o.exitCode == 0 || !ok {
				// runc may refuse the root file system before the hook
				// runs; then the hook did nothing, which is also safe.
				if o.exitCode != 0 && !strings.Contains(o.hookLog, "plan:") {
					t.Skipf("runc refused the rootfs before the hook ran: %s", firstLine(o.stderr))
				}
				t.Fatalf("want a failed start with the hook's line\n%s", o.debug())
			}
			t.Logf("hook: %s", got)
			if !strings.Contains(got, tt.wantErr) || strings.Count(strings.TrimSpace(got), "\n") != 0 {
				t.Errorf("hook line %q, want one line containing %q", got, tt.wantErr)
			}
			for _, p := range []string{"etc/ld.so.conf.d/wsl-gpu-hook.conf", "etc/ld.so.cache", "dev/dxg"} {
				if _, err := os.Lstat(filepath.Join(o.rootfs, p)); err == nil {
					t.Errorf("the failed hook left %s in the image", p)
				}
			}
		})
	}
}

func mountOrFail(t *testing.T, src, dst, fstype string, flags uintptr, data string) {
	t.Helper()
	if err := unix.Mount(src, dst, fstype, flags, data); err != nil {
		t.Fatalf("mount %s: %v", dst, err)
	}
	t.Cleanup(func() { unix.Unmount(dst, unix.MNT_DETACH) })
}

func copyTree(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.Walk(from, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		dst := filepath.Join(to, rel)
		switch {
		case fi.IsDir():
			return os.MkdirAll(dst, fi.Mode().Perm())
		case fi.Mode()&os.ModeSymlink != 0:
			l, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(l, dst)
		case fi.Mode().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(dst, data, fi.Mode().Perm())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return l
}
