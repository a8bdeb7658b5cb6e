package dxcore

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/emulated"
)

func TestEnumerateMissingDevice(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dxg")
	e, err := Enumerate(path)
	if e != nil || !errors.Is(err, ErrNoDevice) || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Enumerate = %v, %v; want ErrNoDevice", e, err)
	}
	want := "open " + path + ": no such file or directory: not a WSL2 VM with GPU paravirtualization: run this inside WSL2 on Windows 10 21H2+/11 with a current GPU driver, or point dxg_device in the config at the device"
	if err.Error() != want {
		t.Errorf("err = %q\nwant  %q", err, want)
	}
}

func TestEnumerateNotADxgDevice(t *testing.T) {
	// TestWireEnumeration covers the device code where this cannot run.
	emulated.Skip(t, "the kernel's answer to dxg ioctls on other files")
	// Any other file answers the dxg ioctls with ENOTTY, as a kernel
	// without them does.
	regular := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(regular, []byte("not a device"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/dev/null", regular} {
		t.Run(path, func(t *testing.T) {
			if _, err := os.Stat(path); err != nil {
				t.Skipf("no %s here: %v", path, err)
			}
			e, err := Enumerate(path)
			if e != nil || !errors.Is(err, ErrUnsupported) || !errors.Is(err, unix.ENOTTY) {
				t.Fatalf("Enumerate = %v, %v; want ErrUnsupported", e, err)
			}
			want := "enumerate adapters on " + path + ": inappropriate ioctl for device: the WSL kernel does not know the dxg adapter ioctls: update WSL (wsl --update)"
			if err.Error() != want {
				t.Errorf("err = %q\nwant  %q", err, want)
			}
		})
	}
}

func TestEnumeratePermissionDenied(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("skipped as root: root opens files whatever their mode (openError's mapping is tested in TestOpenError)")
	}
	path := filepath.Join(t.TempDir(), "dxg")
	if err := os.WriteFile(path, nil, 0); err != nil {
		t.Fatal(err)
	}
	_, err := Enumerate(path)
	if !errors.Is(err, ErrPermission) {
		t.Fatalf("err = %v, want ErrPermission", err)
	}
}

func TestOpenError(t *testing.T) {
	tests := []struct {
		name   string
		err    error
		want   string
		wantIs error
	}{
		{"missing", unix.ENOENT, "open /dev/dxg: no such file or directory: not a WSL2 VM with GPU paravirtualization: run this inside WSL2 on Windows 10 21H2+/11 with a current GPU driver, or point dxg_device in the config at the device", ErrNoDevice},
		{"node without driver", unix.ENXIO, "open /dev/dxg: no such device or address: not a WSL2 VM with GPU paravirtualization: run this inside WSL2 on Windows 10 21H2+/11 with a current GPU driver, or point dxg_device in the config at the device", ErrNoDevice},
		{"permission", unix.EACCES, "open /dev/dxg: permission denied: the GPU device is not accessible to this user: run as root or make /dev/dxg mode 0666 (WSL's default)", ErrPermission},
		{"seccomp or LSM", unix.EPERM, "open /dev/dxg: operation not permitted: the GPU device is not accessible to this user: run as root or make /dev/dxg mode 0666 (WSL's default)", ErrPermission},
		{"other", unix.EMFILE, "open /dev/dxg: too many open files", unix.EMFILE},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := openError("/dev/dxg", tt.err)
			if err.Error() != tt.want {
				t.Errorf("err = %q\nwant  %q", err, tt.want)
			}
			if !errors.Is(err, tt.wantIs) || !errors.Is(err, tt.err) {
				t.Errorf("%v does not match %v and %v", err, tt.wantIs, tt.err)
			}
		})
	}
}

func TestDeviceIoctlsReachTheKernel(t *testing.T) {
	emulated.Skip(t, "the kernel's answer to dxg ioctls on /dev/null")
	// Each thin ioctl wrapper, pointers included, goes through a real
	// syscall; /dev/null refuses them all with ENOTTY.
	f, err := os.Open("/dev/null")
	if err != nil {
		t.Skipf("no /dev/null: %v", err)
	}
	defer f.Close()
	d := device{fd: int(f.Fd())}
	buf := make([]byte, adaptersMax*sizeofAdapterInfo)
	tests := []struct {
		name string
		call func() error
	}{
		{"enumAdapters3 count", func() error { _, err := d.enumAdapters3(enumFilterComputeOnly, nil); return err }},
		{"enumAdapters3 fill", func() error { _, err := d.enumAdapters3(enumFilterComputeOnly, buf); return err }},
		{"enumAdapters2", func() error { _, err := d.enumAdapters2(buf); return err }},
		{"queryAdapterInfo", func() error { return d.queryAdapterInfo(1, qaiQueryRegistry, newRegistryRequest(0)) }},
		{"closeAdapter", func() error { return d.closeAdapter(1) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.call(); !errors.Is(err, unix.ENOTTY) {
				t.Errorf("err = %v, want ENOTTY", err)
			}
		})
	}
}
