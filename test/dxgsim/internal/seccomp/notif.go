package seccomp

import (
	"fmt"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Data is struct seccomp_data: the system call as the filter saw it.
type Data struct {
	Nr                 int32
	Arch               uint32
	InstructionPointer uint64
	Args               [6]uint64
}

// Notif is struct seccomp_notif: one system call waiting for an answer.
// Pid is the calling thread's id in the supervisor's pid namespace.
type Notif struct {
	ID    uint64
	Pid   uint32
	Flags uint32
	Data  Data
}

// resp is struct seccomp_notif_resp.
type resp struct {
	ID    uint64
	Val   int64
	Error int32
	Flags uint32
}

// Sizes the ioctl numbers encode; a mismatch would make every ioctl fail.
var (
	_ [unix.SECCOMP_IOCTL_NOTIF_RECV>>16&0x3fff - unsafe.Sizeof(Notif{})]struct{}
	_ [unsafe.Sizeof(Notif{}) - unix.SECCOMP_IOCTL_NOTIF_RECV>>16&0x3fff]struct{}
	_ [unix.SECCOMP_IOCTL_NOTIF_SEND>>16&0x3fff - unsafe.Sizeof(resp{})]struct{}
	_ [unsafe.Sizeof(resp{}) - unix.SECCOMP_IOCTL_NOTIF_SEND>>16&0x3fff]struct{}
)

// Listener receives and answers notifications; all methods are safe to
// call from several goroutines at once, and several may wait in Receive:
// the kernel hands each notification to exactly one of them.
type Listener struct {
	fd int
}

// NewListener takes ownership of fd, a listener from Install.
func NewListener(fd int) *Listener { return &Listener{fd: fd} }

// Receive blocks until the next notification. A waiting Receive cannot be
// interrupted, and closing the fd under it would let a later call reach
// whatever reuses the number, so the listener is never closed: it goes away
// with the supervisor process, and then callers still blocked in a filtered
// system call fail with ENOSYS.
func (l *Listener) Receive(n *Notif) error {
	for {
		*n = Notif{} // the kernel insists on a zeroed buffer
		err := ioctl(l.fd, unix.SECCOMP_IOCTL_NOTIF_RECV, unsafe.Pointer(n))
		switch err {
		case nil:
			return nil
		case unix.ENOENT: // the caller died between queueing and now
			continue
		}
		return fmt.Errorf("receive seccomp notification: %w", err)
	}
}

// Valid reports whether notification id is still pending: the thread has
// not been killed and so its pid and memory still belong to it.
func (l *Listener) Valid(id uint64) bool {
	return ioctl(l.fd, unix.SECCOMP_IOCTL_NOTIF_ID_VALID, unsafe.Pointer(&id)) == nil
}

// Continue lets the system call run in the kernel as if unfiltered.
func (l *Listener) Continue(id uint64) error {
	return l.send(&resp{ID: id, Flags: unix.SECCOMP_USER_NOTIF_FLAG_CONTINUE})
}

// Return completes the system call without running it: it fails with
// errno if that is non-zero, else returns val.
func (l *Listener) Return(id uint64, val int64, errno syscall.Errno) error {
	r := &resp{ID: id, Val: val}
	if errno != 0 {
		r.Error = -int32(errno)
	}
	return l.send(r)
}

func (l *Listener) send(r *resp) error {
	err := ioctl(l.fd, unix.SECCOMP_IOCTL_NOTIF_SEND, unsafe.Pointer(r))
	if err == unix.ENOENT { // the caller died or was interrupted; nothing to answer
		return nil
	}
	if err != nil {
		return fmt.Errorf("answer seccomp notification: %w", err)
	}
	return nil
}

func ioctl(fd int, req uint, arg unsafe.Pointer) error {
	for {
		_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), uintptr(req), uintptr(arg))
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 {
			return errno
		}
		return nil
	}
}
