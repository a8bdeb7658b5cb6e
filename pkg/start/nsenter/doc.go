// Package nsenter runs a function inside another process's mount namespace.
//
// setns(CLONE_NEWNS) fails with EINVAL for a thread that shares its fs
// attributes with others, and every thread of a Go program does. The way
// out, without cgo or a re-exec: lock the calling goroutine to its OS
// thread, unshare CLONE_FS for that thread alone, setns, do the work, then
// setns back and restore the thread's root and working directory.
//
// The calling goroutine stays locked to that thread afterwards. Its view is
// the caller's again, but the thread keeps fs attributes of its own: a later
// chdir, chroot or umask by another thread would not reach it. Left
// unlocked, the Go runtime would run other goroutines on it; locked, only
// the caller's goroutine ever does, and the thread is discarded when that
// goroutine ends. Running the work on the caller's goroutine, rather than
// on a new one whose thread is thrown away, spares the hook a thread
// switch (and, when the main goroutine ran it, the main thread being parked
// for good) on every container start.
package nsenter
