package seccomp

import (
	"encoding/binary"
	"testing"

	"golang.org/x/sys/unix"
)

// run interprets the subset of classic BPF that Filter emits, over a
// seccomp_data image, and fails on anything else so a new instruction
// cannot slip through untested.
func run(t *testing.T, prog []unix.SockFilter, d Data) uint32 {
	t.Helper()
	img := make([]byte, 64)
	binary.LittleEndian.PutUint32(img[0:], uint32(d.Nr))
	binary.LittleEndian.PutUint32(img[4:], d.Arch)
	binary.LittleEndian.PutUint64(img[8:], d.InstructionPointer)
	for i, a := range d.Args {
		binary.LittleEndian.PutUint64(img[16+8*i:], a)
	}
	var acc uint32
	for pc := 0; pc < len(prog); pc++ {
		in := prog[pc]
		switch in.Code {
		case unix.BPF_LD | unix.BPF_W | unix.BPF_ABS:
			acc = binary.LittleEndian.Uint32(img[in.K:])
		case unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K:
			if acc == in.K {
				pc += int(in.Jt)
			} else {
				pc += int(in.Jf)
			}
		case unix.BPF_RET | unix.BPF_K:
			return in.K
		default:
			t.Fatalf("instruction %d: unexpected code %#x", pc, in.Code)
		}
	}
	t.Fatal("program fell off its end")
	return 0
}

func TestFilter(t *testing.T) {
	reqs := []uint32{0xC00C4701, 0xC0184709, 0xC0104714, 0xC0044715, 0xC018473E}
	prog := Filter(reqs)
	ioctl := func(req uint64) Data {
		return Data{Nr: unix.SYS_IOCTL, Arch: unix.AUDIT_ARCH_X86_64, Args: [6]uint64{3, req}}
	}
	tests := []struct {
		name string
		data Data
		want uint32
	}{
		{"first request", ioctl(0xC00C4701), unix.SECCOMP_RET_USER_NOTIF},
		{"last request", ioctl(0xC018473E), unix.SECCOMP_RET_USER_NOTIF},
		{"high bits ignored like the kernel's unsigned int", ioctl(0xffffffff_C0184709), unix.SECCOMP_RET_USER_NOTIF},
		{"other ioctl", ioctl(unix.TCGETS), unix.SECCOMP_RET_ALLOW},
		{"wrong size, same nr", ioctl(0xC0204709), unix.SECCOMP_RET_ALLOW},
		{"request in another argument", Data{Nr: unix.SYS_IOCTL, Arch: unix.AUDIT_ARCH_X86_64, Args: [6]uint64{0xC0184709, 1}}, unix.SECCOMP_RET_ALLOW},
		{"other syscall", Data{Nr: unix.SYS_READ, Arch: unix.AUDIT_ARCH_X86_64, Args: [6]uint64{3, 0xC0184709}}, unix.SECCOMP_RET_ALLOW},
		{"i386 compat ioctl", Data{Nr: 54, Arch: unix.AUDIT_ARCH_I386, Args: [6]uint64{3, 0xC0184709}}, unix.SECCOMP_RET_ALLOW},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := run(t, prog, tt.data); got != tt.want {
				t.Errorf("action = %#x, want %#x", got, tt.want)
			}
		})
	}
}
