package dxcore

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Enumerate opens the dxg device at path, lists every adapter the Windows
// host exposes (compute-only ones included when the kernel can), queries
// each with every detail, closes every handle it opened and the device.
//
// Errors match ErrNoDevice, ErrPermission, ErrUnsupported or ErrNoAdapters
// with errors.Is. When every adapter failed its queries the Enumeration is
// returned too, with the reasons in Skipped, alongside ErrNoAdapters.
func Enumerate(path string) (*Enumeration, error) {
	return EnumerateWith(path, Options{Details: true})
}

// EnumerateWith is Enumerate asking only what opt selects: a container
// start calls it without Details.
func EnumerateWith(path string, opt Options) (*Enumeration, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, openError(path, err)
	}
	defer unix.Close(fd)
	e, err := enumerateWith(device{fd: fd}, opt)
	if err != nil && !errors.Is(err, ErrNoAdapters) {
		return nil, fmt.Errorf("enumerate adapters on %s: %w", path, err)
	}
	return e, err
}

// device issues the dxg ioctls on one open fd. Each method is one ioctl:
// it encodes the argument, pins any Go buffer the argument points at for
// the duration of the call, and decodes only what the kernel wrote back.
type device struct {
	fd int
	// sys, when set, answers each ioctl in place of the kernel: tests
	// play a kernel at the level of argument bytes and user pointers,
	// where qemu-user (the arm64 test runs) refuses the dxg numbers.
	sys func(req uint32, arg []byte) error
}

func (d device) ioctl(req uint32, arg []byte) error {
	if d.sys != nil {
		return d.sys(req, arg)
	}
	r1, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(d.fd), uintptr(req), uintptr(unsafe.Pointer(&arg[0])))
	runtime.KeepAlive(arg)
	return ioctlResult(r1, errno)
}

// pin keeps b in place and alive until p.Unpin and returns its address for
// a pointer field inside an ioctl argument; the garbage collector cannot
// see such a pointer, so without the pin it could free b mid-call.
func pin(p *runtime.Pinner, b []byte) uint64 {
	if len(b) == 0 {
		return 0
	}
	p.Pin(&b[0])
	return uint64(uintptr(unsafe.Pointer(&b[0])))
}

func (d device) enumAdapters3(filter uint64, infos []byte) (uint32, error) {
	var p runtime.Pinner
	defer p.Unpin()
	arg := encodeEnumAdapters3(filter, uint32(len(infos)/sizeofAdapterInfo), pin(&p, infos))
	if err := d.ioctl(LX_DXENUMADAPTERS3, arg); err != nil {
		return 0, err
	}
	return decodeEnumAdapters3Count(arg), nil
}

func (d device) enumAdapters2(infos []byte) (uint32, error) {
	var p runtime.Pinner
	defer p.Unpin()
	arg := encodeEnumAdapters2(uint32(len(infos)/sizeofAdapterInfo), pin(&p, infos))
	if err := d.ioctl(LX_DXENUMADAPTERS2, arg); err != nil {
		return 0, err
	}
	return decodeEnumAdapters2Count(arg), nil
}

func (d device) queryAdapterInfo(handle, typ uint32, data []byte) error {
	var p runtime.Pinner
	defer p.Unpin()
	return d.ioctl(LX_DXQUERYADAPTERINFO, encodeQueryAdapterInfo(handle, typ, pin(&p, data), uint32(len(data))))
}

func (d device) closeAdapter(handle uint32) error {
	return d.ioctl(LX_DXCLOSEADAPTER, encodeCloseAdapter(handle))
}

func openError(path string, err error) error {
	switch {
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENOTDIR),
		errors.Is(err, unix.ENODEV), errors.Is(err, unix.ENXIO):
		return fmt.Errorf("open %s: %w: %w", path, err, ErrNoDevice)
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
		return fmt.Errorf("open %s: %w: %w", path, err, ErrPermission)
	}
	return fmt.Errorf("open %s: %w", path, err)
}
