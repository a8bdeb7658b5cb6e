// Package nsenter runs a function inside another process's mount namespace.
//
// setns(CLONE_NEWNS) fails with EINVAL for a thread that shares its fs
// attributes with others, and every thread of a Go program does. The way
// out, without cgo or a re-exec: lock a goroutine to its OS thread, unshare
// CLONE_FS for that thread alone, setns, do the work, and never unlock, so
// the Go runtime throws the thread away instead of reusing it for other
// goroutines that must stay in the host's namespace.
package nsenter

import (
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"
)

// InMountNS runs fn in the mount namespace of pid and returns its error.
// fn runs on a dedicated OS thread that is discarded afterwards; it must
// not start goroutines that expect to share that namespace.
func InMountNS(pid int, fn func() error) error {
	nsPath := fmt.Sprintf("/proc/%d/ns/mnt", pid)
	// Open in the caller's namespace: the path names the target's.
	fd, err := unix.Open(nsPath, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open container mount namespace: %w", err)
	}
	done := make(chan error, 1)
	go func() {
		defer unix.Close(fd)
		// Never unlocked: the thread dies with the goroutine.
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_FS); err != nil {
			done <- fmt.Errorf("unshare fs attributes: %w", err)
			return
		}
		if err := unix.Setns(fd, unix.CLONE_NEWNS); err != nil {
			done <- fmt.Errorf("enter mount namespace %s: %w", nsPath, err)
			return
		}
		done <- fn()
	}()
	return <-done
}
