// Package emulated tells a test whether it runs under a user-mode
// emulator, as make test-arm64 runs the arm64 tests (qemu-aarch64-static
// through go test -exec), where what the emulator keeps from the kernel
// cannot be tested: qemu-user passes an ioctl on only if its own table
// knows the number, and answers the dxg numbers with ENOSYS ("Unsupported
// ioctl: cmd=0xffffffffc018473e" with -d unimp), so dxgsim never sees them;
// qemu 7.2 (Debian 12) has no openat2 (ENOSYS); without binfmt_misc a test
// cannot start its own binary again; and the host's ldconfig, loader and
// gcc are the host machine's, not the tested one's.
//
// The probe is one ioctl: LX_DXENUMADAPTERS3 on /dev/null, which a kernel
// answers with ENOTTY without reading the argument and no kernel answers
// with ENOSYS. Test-only: never imported by what ships.
package emulated

import (
	"errors"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// lxDxEnumAdapters3 is _IOWR('G', 0x3e, 24), from the WSL kernel's
// include/uapi/misc/d3dkmthk.h.
const lxDxEnumAdapters3 = 0xC018473E

// Reason says why the dxg ioctls cannot reach the kernel here, "" when
// they can (or when /dev/null cannot be opened to ask).
func Reason() string {
	f, err := os.Open(os.DevNull)
	if err != nil {
		return ""
	}
	defer f.Close()
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, f.Fd(), lxDxEnumAdapters3, 0)
	if errors.Is(errno, unix.ENOSYS) {
		return "an emulator (qemu-user) runs this test (it answers ioctl 0xc018473e, LX_DXENUMADAPTERS3, with ENOSYS, as no kernel does): the calls it keeps from the kernel (the dxg ioctls, openat2 in qemu 7.2), starting the test binary again without binfmt_misc, and the host's tools and gcc-built libraries, which are another machine's, cannot be tested here"
	}
	return ""
}

// Skip skips t, saying why and what it needed, when Reason is not "".
func Skip(t testing.TB, what string) {
	t.Helper()
	if r := Reason(); r != "" {
		t.Skipf("%s: %s", what, r)
	}
}
