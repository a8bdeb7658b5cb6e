package nsenter

import (
	"fmt"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"
)

// InMountNS runs fn in the mount namespace of pid and returns its error.
// fn runs on the calling goroutine, whose root and working directory are
// those of pid's mount namespace meanwhile; it must not start goroutines
// that expect to share that namespace. Afterwards the calling goroutine
// is back in its own namespace, root and working directory, and stays
// locked to its OS thread (see the package documentation).
func InMountNS(pid int, fn func() error) error {
	nsPath := "/proc/" + strconv.Itoa(pid) + "/ns/mnt"
	// Open in the caller's namespace: the path names the target's.
	fd, err := unix.Open(nsPath, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open container mount namespace: %w", err)
	}
	defer unix.Close(fd)

	runtime.LockOSThread()
	home, err := saveFS()
	if err != nil {
		// Nothing changed yet: the thread may serve others again.
		runtime.UnlockOSThread()
		return err
	}
	defer home.close()
	// From here on the thread's fs attributes are its own: never unlocked.
	if err := unix.Unshare(unix.CLONE_FS); err != nil {
		return fmt.Errorf("unshare fs attributes: %w", err)
	}
	if err := unix.Setns(fd, unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("enter mount namespace %s: %w", nsPath, err)
	}
	ferr := fn()
	if err := home.restore(); err != nil {
		// The goroutine would go on resolving host paths in the
		// container's namespace, and cannot leave this thread: nothing
		// it did next could be trusted.
		panic(fmt.Sprintf("nsenter: return from the mount namespace of pid %d: %v", pid, err))
	}
	return ferr
}

// fsState is a thread's mount namespace, root and working directory, held
// open so they can be restored exactly (a path could name something else
// by then).
type fsState struct {
	ns, root, cwd int
}

// saveFS opens the calling thread's mount namespace, root and working
// directory. The thread must be locked.
func saveFS() (fsState, error) {
	s := fsState{ns: -1, root: -1, cwd: -1}
	var err error
	if s.ns, err = unix.Open("/proc/thread-self/ns/mnt", unix.O_RDONLY|unix.O_CLOEXEC, 0); err != nil {
		return s, fmt.Errorf("open own mount namespace: %w", err)
	}
	if s.root, err = unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err != nil {
		s.close()
		return s, fmt.Errorf("open own root: %w", err)
	}
	if s.cwd, err = unix.Open(".", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err != nil {
		s.close()
		return s, fmt.Errorf("open own working directory: %w", err)
	}
	return s, nil
}

// restore puts the thread back into the saved namespace, then the saved
// root (setns set it to the namespace's) and working directory.
func (s fsState) restore() error {
	if err := unix.Setns(s.ns, unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("setns: %w", err)
	}
	if err := unix.Fchdir(s.root); err != nil {
		return fmt.Errorf("fchdir to the root: %w", err)
	}
	if err := unix.Chroot("."); err != nil {
		return fmt.Errorf("chroot: %w", err)
	}
	if err := unix.Fchdir(s.cwd); err != nil {
		return fmt.Errorf("fchdir to the working directory: %w", err)
	}
	return nil
}

func (s fsState) close() {
	for _, fd := range []int{s.ns, s.root, s.cwd} {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
}

// Prepare starts, in the background, what the first InMountNS of a process
// would otherwise start on its own path: the Go runtime's template thread,
// which the first runtime.LockOSThread of a process creates (about 0.13 ms
// on a nested VM: an M, a stack, a clone). Call it early in a process that
// is going to enter, so the thread is made while the process waits for
// other work (the hook: while it enumerates adapters). It changes nothing
// else: the goroutine locks and unlocks its thread without touching it.
func Prepare() {
	go func() {
		runtime.LockOSThread()
		runtime.UnlockOSThread()
	}()
}
