package dxcore

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// ntStatus is a raw negative NTSTATUS an old (4.19-era) dxg driver returned
// as the ioctl result instead of an errno.
type ntStatus uint32

// known names the statuses the kernel translates and the errno it picks.
func (s ntStatus) known() (name string, errno unix.Errno) {
	switch s {
	case 0xC0000002:
		return "STATUS_NOT_IMPLEMENTED", unix.EPERM
	case 0xC0000008:
		return "STATUS_INVALID_HANDLE", unix.EBADF
	case 0xC000000D:
		return "STATUS_INVALID_PARAMETER", unix.EINVAL
	case 0xC0000022:
		return "STATUS_ACCESS_DENIED", unix.EACCES
	case 0xC0000023:
		return "STATUS_BUFFER_TOO_SMALL", unix.EOVERFLOW
	case 0xC00000BB:
		return "STATUS_NOT_SUPPORTED", unix.EPERM
	case 0xC0000225:
		return "STATUS_NOT_FOUND", unix.ENOENT
	case 0xC00002B6:
		return "STATUS_DEVICE_REMOVED", unix.ENODEV
	}
	// The kernel's translation turns every other failure into EINVAL.
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
// results are NTSTATUS success codes (STATUS_PENDING and the like).
func ioctlResult(r1 uintptr, errno unix.Errno) error {
	if errno != 0 {
		return errno
	}
	if int32(r1) < 0 {
		return ntStatus(uint32(r1))
	}
	return nil
}
