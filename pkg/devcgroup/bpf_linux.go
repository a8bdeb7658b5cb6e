package devcgroup

import (
	"errors"
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
