// Package seccomp builds and installs the seccomp filter that routes
// selected ioctl requests to a user-space supervisor
// (SECCOMP_RET_USER_NOTIF) and wraps the listener fd's notification
// protocol. It knows nothing about /dev/dxg: the caller names the requests.
//
// Everything is written against the kernel UAPI (linux/seccomp.h,
// linux/filter.h) with golang.org/x/sys/unix; there is no libseccomp and
// no cgo.
//
// A filter is inherited by every child and survives execve, so installing
// it once in the process that then execs the command covers the whole tree,
// including daemons, runtimes and container processes. Requests that are
// not listed, and every other system call, run with no supervisor round
// trip.
package seccomp
