package dxcore

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// OpenSession opens the dxg device at path for a long-lived statistics
// reader and enumerates the adapters with every detail, keeping one handle
// each. Errors match ErrNoDevice, ErrPermission or ErrUnsupported.
func OpenSession(path string) (*Session, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, openError(path, err)
	}
	s, err := newSession(device{fd: fd}, func() error { return unix.Close(fd) })
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("enumerate adapters on %s: %w", path, err)
	}
	return s, nil
}

func (d device) queryStatistics(arg []byte) error {
	return d.ioctl(LX_DXQUERYSTATISTICS, arg)
}

func (d device) queryVideoMemoryInfo(arg []byte) error {
	return d.ioctl(LX_DXQUERYVIDEOMEMORYINFO, arg)
}
