package mounts

import (
	"errors"
	"os"
	"path"
	"strings"

	"golang.org/x/sys/unix"
)

// Confined lookups in the container's rootfs. The kernel does the
// confinement: openat2 with RESOLVE_IN_ROOT resolves every component,
// symlinks and ".." included, as if root were "/", so no path can leave it.
//
// pathrs-lite (filepath-securejoin) wraps the same openat2 call, but also
// names each handle by reading /proc/thread-self/fd/N through a private
// procfs mount it creates on first use, and reopens every directory through
// it: about 1.3 ms of a hook's run (first use) plus a procfs round trip per
// lookup, for names the hook never reads. Linux 5.6+ is required either
// way: devcgroup needs openat2 too.

// openat2Attempts bounds the retries of a lookup the kernel refused with
// EAGAIN because a rename raced with a ".." it resolved.
const openat2Attempts = 32

// Handles are plain descriptors, not *os.File: an os.File costs an fcntl,
// an allocation and a cleanup each, for nothing the hook uses.

// openInRoot opens unsafePath inside the directory open at root with flags
// (O_CLOEXEC is added) and returns the new descriptor.
func openInRoot(root int, unsafePath string, flags uint64) (int, error) {
	how := &unix.OpenHow{Flags: flags | unix.O_CLOEXEC, Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS}
	for range openat2Attempts {
		fd, err := unix.Openat2(root, unsafePath, how)
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return -1, &os.PathError{Op: "openat2", Path: unsafePath, Err: err}
		}
		return fd, nil
	}
	return -1, &os.PathError{Op: "openat2", Path: unsafePath, Err: unix.EAGAIN}
}

// mkdirAllInRoot returns an O_PATH descriptor of the directory unsafePath
// inside root, creating the missing directories (mode 0755, less the umask). The
// existing part is resolved confined to root, links followed as the image
// has them; each created component is opened without following anything,
// so a link swapped in meanwhile fails the call instead of being followed.
func mkdirAllInRoot(root int, unsafePath string) (int, error) {
	p := path.Clean("/" + unsafePath)
	existing, missing := p, []string(nil)
	var dir int
	for {
		d, err := openInRoot(root, existing, unix.O_PATH|unix.O_DIRECTORY)
		if err == nil {
			dir = d
			break
		}
		if !errors.Is(err, unix.ENOENT) || existing == "/" {
			return -1, err
		}
		i := strings.LastIndexByte(existing, '/')
		missing = append([]string{existing[i+1:]}, missing...)
		existing = existing[:max(i, 1)]
	}
	for _, c := range missing {
		if err := unix.Mkdirat(dir, c, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
			unix.Close(dir)
			return -1, &os.PathError{Op: "mkdirat", Path: c, Err: err}
		}
		fd, err := unix.Openat2(dir, c, &unix.OpenHow{
			Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_XDEV,
		})
		unix.Close(dir)
		if err != nil {
			return -1, &os.PathError{Op: "openat2", Path: c, Err: err}
		}
		dir = fd
	}
	return dir, nil
}
