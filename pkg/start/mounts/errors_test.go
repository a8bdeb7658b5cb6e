package mounts

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestAdvise(t *testing.T) {
	bind := Step{Kind: Bind, Source: "/usr/lib/wsl/drivers/nv_1", Target: "/usr/lib/wsl/drivers/nv_1"}
	file := Step{Kind: File, Target: "/etc/ld.so.conf.d/wsl-gpu-hook.conf"}
	node := Step{Kind: Device, Source: "/dev/dxg", Target: "/dev/dxg"}
	const (
		readOnly = "the container's root filesystem is read-only before the hook ran: let the runtime make it read-only (config.json root.readonly), not the storage"
		full     = "the container's root filesystem is full: free space in the image's storage"
		image    = "the image has a file or a link that does not resolve inside it on this path: fix the image"
		host     = "the host's WSL files changed while the hook ran (a Windows driver update?): run wsl --shutdown and start the container again"
		raced    = "a directory of the image on this path was removed while the hook worked in it: something is changing the container's root filesystem during its start: stop that and start the container again"
	)
	// pathErr is how pathrs and os wrap an errno.
	pathErr := func(errno unix.Errno) error { return fmt.Errorf("mkdirat usr: %w", errno) }
	tests := []struct {
		name    string
		err     error
		want    string // the whole message
		wantErr error  // still matched by errors.Is
	}{
		{name: "read-only rootfs", err: newError(file, OpWrite, &fs.PathError{Op: "create", Path: "wsl-gpu-hook.conf", Err: unix.EROFS}),
			want: "file /etc/ld.so.conf.d/wsl-gpu-hook.conf: write: create wsl-gpu-hook.conf: read-only file system: " + readOnly, wantErr: unix.EROFS},
		{name: "read-only while resolving the parent", err: newError(file, OpResolveParent, pathErr(unix.EROFS)),
			want: "file /etc/ld.so.conf.d/wsl-gpu-hook.conf: mkdir parent: mkdirat usr: read-only file system: " + readOnly},
		{name: "full", err: newError(file, OpWrite, unix.ENOSPC),
			want: "file /etc/ld.so.conf.d/wsl-gpu-hook.conf: write: no space left on device: " + full},
		{name: "quota", err: newError(file, OpWrite, unix.EDQUOT),
			want: "file /etc/ld.so.conf.d/wsl-gpu-hook.conf: write: disk quota exceeded: " + full},
		{name: "a link out of the image", err: newError(file, OpResolveParent, pathErr(unix.EXDEV)),
			want: "file /etc/ld.so.conf.d/wsl-gpu-hook.conf: mkdir parent: mkdirat usr: invalid cross-device link: " + image},
		{name: "a file in the way, no errno", err: newError(file, OpResolveParent, errors.New("not a directory")),
			want: "file /etc/ld.so.conf.d/wsl-gpu-hook.conf: mkdir parent: not a directory: " + image},
		{name: "host folder gone", err: newError(bind, OpOpenTree, unix.ENOENT),
			want: "bind /usr/lib/wsl/drivers/nv_1: open_tree /usr/lib/wsl/drivers/nv_1: no such file or directory: " + host, wantErr: unix.ENOENT},
		{name: "host node gone for a bound node", err: newError(Step{Kind: Device, Source: "/dev/dxg", Target: "/dev/dxg", BindNode: true}, OpOpenTree, unix.ENOENT),
			want: "device /dev/dxg: open_tree /dev/dxg: no such file or directory: " + host},
		{name: "image directory removed meanwhile", err: newError(node, OpMknod, unix.ENOENT),
			want: "device /dev/dxg: mknod: no such file or directory: " + raced},
		{name: "other open_tree failure: no advice", err: newError(bind, OpOpenTree, unix.EPERM),
			want: "bind /usr/lib/wsl/drivers/nv_1: open_tree /usr/lib/wsl/drivers/nv_1: operation not permitted"},
		{name: "other failure: no advice", err: newError(node, OpReplace, errors.New("the image has a directory at /dev/dxg: remove it from the image")),
			want: "device /dev/dxg: replace: the image has a directory at /dev/dxg: remove it from the image"},
		{name: "not a step error", err: fmt.Errorf("open container rootfs: %w", unix.ENOENT),
			want: "open container rootfs: no such file or directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Advise(tt.err)
			if got.Error() != tt.want {
				t.Fatalf("Advise =\n %s\nwant\n %s", got, tt.want)
			}
			if tt.wantErr != nil && !errors.Is(got, tt.wantErr) {
				t.Fatalf("Advise lost the cause %v", tt.wantErr)
			}
		})
	}
}

// The fields say what failed; a path in the source never changes the advice.
func TestErrorFields(t *testing.T) {
	s := Step{Kind: Bind, Source: "/host/open_tree mkdir parent", Target: "/usr/lib/wsl/lib"}
	e := newError(s, OpMkdir, fmt.Errorf("mkdirat: %w", unix.EACCES))
	if e.Op != OpMkdir || e.Source != s.Source || e.Target != s.Target || e.Errno != unix.EACCES || e.Kind != Bind {
		t.Fatalf("fields %+v", e)
	}
	if strings.Contains(Advise(e).Error(), "fix the image") {
		t.Fatalf("advice chosen from the source path: %v", Advise(e))
	}
	if e := newError(Step{Kind: File, Source: "x", Target: "/t"}, OpWrite, errors.New("x")); e.Source != "" || e.Errno != 0 {
		t.Fatalf("file step error %+v: want no source, no errno", e)
	}
}
