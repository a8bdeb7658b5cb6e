package hookroot

import (
	"errors"
	"fmt"
	"io/fs"

	"golang.org/x/sys/unix"
)

// Open opens the directory at path (for WorkingDir: ".") and returns it
// if it is the container's root filesystem (see the package
// documentation), else a *RefusedError and nothing open. bundle is the
// state's.
func Open(path string, src Source, bundle string) (*Root, error) {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", src, &fs.PathError{Op: "open", Path: path, Err: err})
	}
	name := path
	if src == WorkingDir {
		// Only for the line and the log: the descriptor is what counts.
		if name, err = unix.Getwd(); err != nil {
			name = "(unreachable)"
		}
	}
	f, err := inspect(fd, bundle)
	if err == nil {
		f.Path, f.Source = name, src
		err = Check(f)
	}
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	return &Root{FD: fd, Path: name}, nil
}

// inspect gathers the facts of the directory open at fd.
func inspect(fd int, bundle string) (Facts, error) {
	var f Facts
	var stx unix.Statx_t
	if err := unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_INO, &stx); err != nil {
		return f, fmt.Errorf("stat the root filesystem: %w", err)
	}
	f.Dir = FileID{unix.Mkdev(stx.Dev_major, stx.Dev_minor), stx.Ino}
	if stx.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT != 0 {
		mountRoot := stx.Attributes&unix.STATX_ATTR_MOUNT_ROOT != 0
		f.MountRoot = &mountRoot
	}
	var err error
	if f.Root, err = stat("/"); err != nil {
		return f, fmt.Errorf("stat /: %w", err)
	}
	if id, err := stat(bundle); err == nil {
		f.Bundle = &id
	}
	// The thread's own: all of the hook's share it, and a test's locked
	// thread may have one of its own.
	if f.MountNS, err = stat("/proc/thread-self/ns/mnt"); err != nil {
		return f, fmt.Errorf("find the hook's mount namespace: %w", err)
	}
	switch id, err := stat("/proc/1/ns/mnt"); {
	case err == nil:
		f.InitMountNS = &id
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
		// A user namespace of the hook's own: see the package doc.
	default:
		return f, fmt.Errorf("find the host's mount namespace: %w", err)
	}
	return f, nil
}

func stat(path string) (FileID, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return FileID{}, &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	return FileID{st.Dev, st.Ino}, nil
}
