package seccomp

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Offsets into struct seccomp_data (linux/seccomp.h).
const (
	offNr      = 0
	offArch    = 4
	offArgs    = 16
	offArg1Low = offArgs + 8 // args[1] low 32 bits, little-endian
)

// Filter returns a BPF program that sends the native x86_64 ioctl system
// calls whose request (low 32 bits of the second argument, as the kernel
// reads an unsigned int) is in requests to the supervisor, and allows
// everything else. Other architectures' entry points (i386 compat, x32)
// are allowed unseen.
func Filter(requests []uint32) []unix.SockFilter {
	const (
		ldAbs = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq   = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		ret   = unix.BPF_RET | unix.BPF_K
	)
	n := len(requests)
	// Layout: 0 ld arch, 1 jeq arch, 2 ld nr, 3 jeq ioctl, 4 ld arg1,
	// 5..5+n-1 jeq request, 5+n ret allow, 6+n ret notify.
	allow := 5 + n
	notify := allow + 1
	jumpTo := func(from, to int) uint8 { return uint8(to - from - 1) }
	prog := []unix.SockFilter{
		{Code: ldAbs, K: offArch},
		{Code: jeq, K: unix.AUDIT_ARCH_X86_64, Jt: 0, Jf: jumpTo(1, allow)},
		{Code: ldAbs, K: offNr},
		{Code: jeq, K: unix.SYS_IOCTL, Jt: 0, Jf: jumpTo(3, allow)},
		{Code: ldAbs, K: offArg1Low},
	}
	for i, r := range requests {
		at := 5 + i
		prog = append(prog, unix.SockFilter{Code: jeq, K: r, Jt: jumpTo(at, notify), Jf: 0})
	}
	return append(prog,
		unix.SockFilter{Code: ret, K: unix.SECCOMP_RET_ALLOW},
		unix.SockFilter{Code: ret, K: unix.SECCOMP_RET_USER_NOTIF},
	)
}

// Install loads prog for every thread of the calling process and returns
// the listener fd (close-on-exec). The caller needs CAP_SYS_ADMIN or
// no_new_privs. TSYNC covers the Go runtime's other threads, so it does not
// matter which thread later calls execve.
func Install(prog []unix.SockFilter) (int, error) {
	if len(prog) > 255 {
		return -1, fmt.Errorf("seccomp filter has %d instructions; jumps reach at most 255", len(prog))
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	flags := uintptr(unix.SECCOMP_FILTER_FLAG_NEW_LISTENER | unix.SECCOMP_FILTER_FLAG_TSYNC | unix.SECCOMP_FILTER_FLAG_TSYNC_ESRCH)
	fd, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, flags, uintptr(unsafe.Pointer(&fprog)))
	if errno != 0 {
		return -1, fmt.Errorf("install seccomp filter: %w", errno)
	}
	return int(fd), nil
}
