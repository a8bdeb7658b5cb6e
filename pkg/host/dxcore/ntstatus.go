package dxcore

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// ntStatus is a raw negative NTSTATUS an old (4.19-era) dxg driver returned
// as the ioctl result instead of an errno.
type ntStatus uint32

// known names the status (or "") and the errno the kernel picks for it.
// It follows ntstatus2int in the kernel's drivers/hv/dxgkrnl/dxgvmbus.c
// (values from its misc.h), so an old driver's raw status and a current
// driver's errno match the same errors.Is target. STATUS_NOT_FOUND is named
// only for the message: the kernel does not translate it, so it is EINVAL
// like every status not listed. STATUS_TIMEOUT (0x102) is absent on
// purpose: it is a success code (NT_SUCCESS), which the kernel returns as a
// positive result, and so does ioctlResult.
func (s ntStatus) known() (name string, errno unix.Errno) {
	switch s {
	case 0xC0000002:
		return "STATUS_NOT_IMPLEMENTED", unix.EPERM
	case 0xC0000008:
		return "STATUS_INVALID_HANDLE", unix.EBADF
	case 0xC000000D:
		return "STATUS_INVALID_PARAMETER", unix.EINVAL
	case 0xC0000017:
		return "STATUS_NO_MEMORY", unix.ENOMEM
	case 0xC000001D:
		return "STATUS_ILLEGAL_INSTRUCTION", unix.EOPNOTSUPP
	case 0xC0000022:
		return "STATUS_ACCESS_DENIED", unix.EACCES
	case 0xC0000023:
		return "STATUS_BUFFER_TOO_SMALL", unix.EOVERFLOW
	case 0xC0000024:
		return "STATUS_OBJECT_TYPE_MISMATCH", unix.EPROTOTYPE
	case 0xC0000033:
		return "STATUS_OBJECT_NAME_INVALID", unix.ENOENT
	case 0xC0000034:
		return "STATUS_OBJECT_NAME_NOT_FOUND", unix.ENOENT
	case 0xC0000035:
		return "STATUS_OBJECT_NAME_COLLISION", unix.EEXIST
	case 0xC00000BB:
		return "STATUS_NOT_SUPPORTED", unix.EPERM
	case 0xC0000225:
		return "STATUS_NOT_FOUND", unix.EINVAL
	case 0xC00002B6:
		return "STATUS_DEVICE_REMOVED", unix.ENODEV
	case 0xC01E0102:
		return "STATUS_GRAPHICS_ALLOCATION_BUSY", unix.EINPROGRESS
	}
	return "", unix.EINVAL
}

func (s ntStatus) Error() string {
	if name, _ := s.known(); name != "" {
		return fmt.Sprintf("NTSTATUS 0x%08X (%s)", uint32(s), name)
	}
	return fmt.Sprintf("NTSTATUS 0x%08X", uint32(s))
}

// Is matches the errno a current kernel would have returned, so callers
// handle old and new drivers alike.
func (s ntStatus) Is(target error) bool {
	_, errno := s.known()
	return target == errno
}

// ioctlResult turns a raw ioctl return into an error: errno first, then a
// negative 32-bit result with errno 0 (an old driver's NTSTATUS). Positive
// results are NTSTATUS success codes (STATUS_PENDING, STATUS_TIMEOUT and
// the like), which the kernel passes through as they are.
func ioctlResult(r1 uintptr, errno unix.Errno) error {
	if errno != 0 {
		return errno
	}
	if int32(r1) < 0 {
		return ntStatus(uint32(r1))
	}
	return nil
}
