package devcgroup

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// bpfProgQueryAttr is the BPF_PROG_QUERY part of union bpf_attr
// (include/uapi/linux/bpf.h). It is declared up to revision although only
// the first fields are used: kernels 6.17 and later write revision whatever
// size is passed to bpf(2) (fixed upstream by 21c4b99b27f3).
type bpfProgQueryAttr struct {
	targetFd        uint32
	attachType      uint32
	queryFlags      uint32
	attachFlags     uint32
	progIDs         uint64 // __aligned_u64 pointer to a __u32 array
	progCnt         uint32
	_               uint32
	progAttachFlags uint64
	linkIDs         uint64
	linkAttachFlags uint64
	revision        uint64
}

// deviceProgramIDs returns the ids of the BPF_CGROUP_DEVICE programs attached
// directly to the cgroup directory open at dirFd (programs on ancestors are
// not listed).
func deviceProgramIDs(dirFd int) ([]uint32, error) {
	// A cgroup holds at most 64 programs per attach type
	// (BPF_CGROUP_MAX_PROGS); ENOSPC reports a larger count, so retry then.
	for size := 64; ; {
		ids := make([]uint32, size)
		var pin runtime.Pinner
		pin.Pin(&ids[0])
		attr := bpfProgQueryAttr{
			targetFd:   uint32(dirFd),
			attachType: unix.BPF_CGROUP_DEVICE,
			progIDs:    uint64(uintptr(unsafe.Pointer(&ids[0]))),
			progCnt:    uint32(len(ids)),
		}
		_, _, errno := unix.Syscall(unix.SYS_BPF, unix.BPF_PROG_QUERY, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr))
		pin.Unpin()
		switch {
		case errno == unix.ENOSPC && int(attr.progCnt) > size:
			size = int(attr.progCnt)
			continue
		case errno != 0:
			return nil, os.NewSyscallError("bpf(BPF_PROG_QUERY)", errno)
		case int(attr.progCnt) > size:
			return nil, errors.New("bpf(BPF_PROG_QUERY): kernel reported more programs than it returned")
		}
		return ids[:attr.progCnt], nil
	}
}

// bpf calls bpf(2) with the attribute struct attr points to.
func bpf(cmd int, attr unsafe.Pointer, size uintptr) (uintptr, unix.Errno) {
	r, _, errno := unix.Syscall(unix.SYS_BPF, uintptr(cmd), uintptr(attr), size)
	return r, errno
}

// bpfFd turns a descriptor bpf(2) returned into one above 0: bpf(2) reads
// fd 0 in an attribute as "none", and a hook may run with stdin closed.
func bpfFd(fd uintptr) (int, error) {
	if fd != 0 {
		return int(fd), nil
	}
	dup, err := unix.FcntlInt(0, unix.F_DUPFD_CLOEXEC, 1)
	unix.Close(0)
	if err != nil {
		return -1, os.NewSyscallError("fcntl(F_DUPFD_CLOEXEC)", err)
	}
	return dup, nil
}

// bpfProgLoadAttr is the BPF_PROG_LOAD part of union bpf_attr, up to
// prog_name (Linux 4.15).
type bpfProgLoadAttr struct {
	progType    uint32
	insnCnt     uint32
	insns       uint64 // pointer
	license     uint64 // pointer to a C string
	logLevel    uint32
	logSize     uint32
	logBuf      uint64 // pointer
	kernVersion uint32
	progFlags   uint32
	progName    [unix.BPF_OBJ_NAME_LEN]byte
}

// progName names the program for `bpftool cgroup tree`, which shows who
// attached it (runc's are nameless).
const progName = "wsl_gpu_hook"

// loadDeviceProgram loads p as a BPF_PROG_TYPE_CGROUP_DEVICE program and
// returns its descriptor. If the kernel refuses it, the error carries the
// verifier's log.
func loadDeviceProgram(p []insn) (int, error) {
	code := encode(p)
	license := []byte("Apache-2.0\x00") // the project's; the program calls no GPL-only helper
	attr := bpfProgLoadAttr{
		progType: unix.BPF_PROG_TYPE_CGROUP_DEVICE,
		insnCnt:  uint32(len(p)),
	}
	copy(attr.progName[:], progName)
	var log []byte
	var first unix.Errno // what the load without a log failed with
	for attempt := 0; ; attempt++ {
		var pin runtime.Pinner
		pin.Pin(&code[0])
		pin.Pin(&license[0])
		attr.insns = uint64(uintptr(unsafe.Pointer(&code[0])))
		attr.license = uint64(uintptr(unsafe.Pointer(&license[0])))
		if log != nil {
			pin.Pin(&log[0])
			attr.logLevel, attr.logSize = 1, uint32(len(log))
			attr.logBuf = uint64(uintptr(unsafe.Pointer(&log[0])))
		}
		fd, errno := bpf(unix.BPF_PROG_LOAD, unsafe.Pointer(&attr), unsafe.Sizeof(attr))
		pin.Unpin()
		switch {
		case errno == 0:
			return bpfFd(fd)
		case errno == unix.EAGAIN && attempt < 30:
			continue // the verifier was interrupted by a signal (Linux 4.20+)
		case errno == unix.EPERM && attempt == 0:
			// Before Linux 5.11 programs are charged to RLIMIT_MEMLOCK,
			// often 64 KiB; the limit is this process's alone.
			_ = unix.Setrlimit(unix.RLIMIT_MEMLOCK, &unix.Rlimit{Cur: unix.RLIM_INFINITY, Max: unix.RLIM_INFINITY})
			continue
		case log == nil && errno != unix.EPERM:
			first, log = errno, make([]byte, 64<<10) // once more, for the verifier's reason
			continue
		}
		if first != 0 {
			errno = first // not ENOSPC from a log too long for its buffer
		}
		err := error(os.NewSyscallError("bpf(BPF_PROG_LOAD)", errno))
		if n := bytes.IndexByte(log, 0); n > 0 {
			err = fmt.Errorf("%w: %s", err, bytes.TrimSpace(log[:n]))
		}
		return -1, err
	}
}

// progFdByID opens the BPF program with the given id.
func progFdByID(id uint32) (int, error) {
	attr := struct{ id, nextID, openFlags uint32 }{id: id}
	fd, errno := bpf(unix.BPF_PROG_GET_FD_BY_ID, unsafe.Pointer(&attr), unsafe.Sizeof(attr))
	if errno != 0 {
		return -1, os.NewSyscallError("bpf(BPF_PROG_GET_FD_BY_ID)", errno)
	}
	return bpfFd(fd)
}

// attachDeviceProgram attaches progFd to the cgroup open at cgFd as a
// BPF_CGROUP_DEVICE program with flags, replacing replaceFd if
// BPF_F_REPLACE is among them.
func attachDeviceProgram(cgFd, progFd int, flags uint32, replaceFd int) error {
	attr := struct{ targetFd, attachBpfFd, attachType, attachFlags, replaceBpfFd uint32 }{
		targetFd: uint32(cgFd), attachBpfFd: uint32(progFd), attachType: unix.BPF_CGROUP_DEVICE, attachFlags: flags,
	}
	if flags&unix.BPF_F_REPLACE != 0 {
		attr.replaceBpfFd = uint32(replaceFd)
	}
	if _, errno := bpf(unix.BPF_PROG_ATTACH, unsafe.Pointer(&attr), unsafe.Sizeof(attr)); errno != 0 {
		return os.NewSyscallError("bpf(BPF_PROG_ATTACH)", errno)
	}
	return nil
}

// detachDeviceProgram detaches progFd from the cgroup open at cgFd.
func detachDeviceProgram(cgFd, progFd int) error {
	attr := struct{ targetFd, attachBpfFd, attachType uint32 }{
		targetFd: uint32(cgFd), attachBpfFd: uint32(progFd), attachType: unix.BPF_CGROUP_DEVICE,
	}
	if _, errno := bpf(unix.BPF_PROG_DETACH, unsafe.Pointer(&attr), unsafe.Sizeof(attr)); errno != 0 {
		return os.NewSyscallError("bpf(BPF_PROG_DETACH)", errno)
	}
	return nil
}

// replaceDevicePrograms makes p the only device program of the cgroup open
// at cgFd, in place of the programs with ids old, as runc does when it
// updates a container: with one old program, one atomic BPF_F_REPLACE
// (Linux 5.6; older kernels refuse the flag with EINVAL and take the
// second way); otherwise attach p beside them, then detach each. Programs
// this process may not open (an LSM's) are left, as runc leaves them.
func replaceDevicePrograms(cgFd int, old []uint32, p []insn) error {
	var oldFds []int
	defer func() {
		for _, fd := range oldFds {
			unix.Close(fd)
		}
	}()
	for _, id := range old {
		fd, err := progFdByID(id)
		if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
			continue
		}
		if err != nil {
			return fmt.Errorf("open device program %d: %w", id, err)
		}
		oldFds = append(oldFds, fd)
	}
	progFd, err := loadDeviceProgram(p)
	if err != nil {
		return err
	}
	defer unix.Close(progFd) // the attachment keeps it loaded

	if len(oldFds) == 1 {
		err := attachDeviceProgram(cgFd, progFd, unix.BPF_F_ALLOW_MULTI|unix.BPF_F_REPLACE, oldFds[0])
		if !errors.Is(err, unix.EINVAL) {
			return err
		}
	}
	if err := attachDeviceProgram(cgFd, progFd, unix.BPF_F_ALLOW_MULTI, -1); err != nil {
		return err
	}
	for _, fd := range oldFds {
		if err := detachDeviceProgram(cgFd, fd); err != nil {
			return err
		}
	}
	return nil
}
