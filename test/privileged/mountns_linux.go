package privileged

import (
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"
)

// InPrivateMountNS runs fn on an OS thread of its own in a new mount
// namespace whose mounts are all private, so nothing fn mounts reaches the
// machine, and returns fn's error. The thread is discarded afterwards: it
// never serves another goroutine. fn must not start goroutines that expect
// its namespace. Callers need root, and Require first.
func InPrivateMountNS(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the namespace dies with the thread
		if err := unix.Unshare(unix.CLONE_NEWNS | unix.CLONE_FS); err != nil {
			errc <- fmt.Errorf("unshare the mount namespace: %w", err)
			return
		}
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			errc <- fmt.Errorf("make / private: %w", err)
			return
		}
		errc <- fn()
	}()
	return <-errc
}
