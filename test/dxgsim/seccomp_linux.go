package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// dxgDev is the simulated device's number: /dev/fuse's, so opening the node
// is harmless, and not in any runtime's default device allow-list.
var dxgDev = unix.Mkdev(10, 229)

// filter returns the BPF program: dxg ioctl requests go to the supervisor,
// everything else runs.
func filter() []unix.SockFilter {
	const (
		ldw  = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq  = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		ret  = unix.BPF_RET | unix.BPF_K
		arch = 4  // offsetof(struct seccomp_data, arch)
		nr   = 0  // offsetof(struct seccomp_data, nr)
		arg1 = 24 // low 32 bits of args[1] (little-endian)
	)
	reqs := []uint32{reqOpenAdapterFromLUID, reqQueryAdapterInfo, reqEnumAdapters2, reqCloseAdapter, reqEnumAdapters3}
	prog := []unix.SockFilter{
		{Code: ldw, K: arch},
		{Code: jeq, K: unix.AUDIT_ARCH_X86_64, Jt: 1, Jf: 0},
		{Code: ret, K: unix.SECCOMP_RET_ALLOW},
		{Code: ldw, K: nr},
		{Code: jeq, K: unix.SYS_IOCTL, Jt: 1, Jf: 0},
		{Code: ret, K: unix.SECCOMP_RET_ALLOW},
		{Code: ldw, K: arg1},
	}
	for i, r := range reqs {
		// Jump to the USER_NOTIF return after the remaining compares
		// and the ALLOW.
		prog = append(prog, unix.SockFilter{Code: jeq, K: r, Jt: uint8(len(reqs) - i), Jf: 0})
	}
	return append(prog,
		unix.SockFilter{Code: ret, K: unix.SECCOMP_RET_ALLOW},
		unix.SockFilter{Code: ret, K: unix.SECCOMP_RET_USER_NOTIF},
	)
}

// installFilter installs the filter on the calling thread (which must then
// exec) and returns the listener fd.
func installFilter() (int, error) {
	prog := filter()
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	fd, _, errno := unix.Syscall(unix.SYS_SECCOMP, 1 /* SECCOMP_SET_MODE_FILTER */, unix.SECCOMP_FILTER_FLAG_NEW_LISTENER, uintptr(unsafe.Pointer(&fprog)))
	if errno != 0 {
		return -1, fmt.Errorf("seccomp(SET_MODE_FILTER, NEW_LISTENER): %w", errno)
	}
	return int(fd), nil
}

// seccompData mirrors struct seccomp_data.
type seccompData struct {
	Nr                 int32
	Arch               uint32
	InstructionPointer uint64
	Args               [6]uint64
}

// notif mirrors struct seccomp_notif.
type notif struct {
	ID    uint64
	Pid   uint32
	Flags uint32
	Data  seccompData
}

// notifResp mirrors struct seccomp_notif_resp.
type notifResp struct {
	ID    uint64
	Val   int64
	Error int32
	Flags uint32
}

// receivers is how many threads take notifications at once: enough that
// a slow caller (being traced, paged out) does not hold up fifty container
// starts, and each answers on its own thread, with no hand-off to another.
const receivers = 8

// supervise answers notifications on listener until it fails (every
// filtered process is gone and dxgsim is exiting).
func supervise(listener int, k *kernel) {
	for i := 0; i < receivers; i++ {
		go receive(listener, k)
	}
}

func receive(listener int, k *kernel) {
	for {
		var n notif
		if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(listener), unix.SECCOMP_IOCTL_NOTIF_RECV, uintptr(unsafe.Pointer(&n))); errno != 0 {
			if errno == unix.EINTR || errno == unix.ENOENT {
				continue
			}
			return
		}
		respond(listener, k, n)
	}
}

func respond(listener int, k *kernel, n notif) {
	resp := notifResp{ID: n.ID}
	r, handled := dispatch(listener, k, n)
	if !handled {
		resp.Flags = unix.SECCOMP_USER_NOTIF_FLAG_CONTINUE
	} else {
		resp.Val = r.val
		if r.errno != 0 {
			resp.Error = -int32(r.errno)
		}
	}
	// ENOENT: the caller died meanwhile; nothing to answer.
	unix.Syscall(unix.SYS_IOCTL, uintptr(listener), unix.SECCOMP_IOCTL_NOTIF_SEND, uintptr(unsafe.Pointer(&resp)))
}

func idValid(listener int, id uint64) bool {
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(listener), unix.SECCOMP_IOCTL_NOTIF_ID_VALID, uintptr(unsafe.Pointer(&id)))
	return errno == 0
}

func dispatch(listener int, k *kernel, n notif) (result, bool) {
	pid := int(n.Pid)
	fd := n.Data.Args[0]
	var st unix.Stat_t
	if err := unix.Stat(fmt.Sprintf("/proc/%d/fd/%d", pid, fd), &st); err != nil {
		return result{}, false
	}
	if st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != dxgDev {
		return result{}, false // not our device: let the real ioctl run
	}
	tgid, start, comm, err := procInfo(pid)
	if err != nil {
		return fail(unix.ESRCH), true
	}
	mem, err := os.OpenFile(fmt.Sprintf("/proc/%d/mem", pid), os.O_RDWR, 0)
	if err != nil {
		return fail(unix.EFAULT), true
	}
	defer mem.Close()
	// The pid in the notification may have died and been reused since;
	// check after opening its memory and before trusting anything read.
	if !idValid(listener, n.ID) {
		return fail(unix.ESRCH), true
	}
	c := &caller{
		tgid: tgid, start: start, comm: comm,
		read: func(addr uint64, size int) ([]byte, error) {
			b := make([]byte, size)
			if _, err := mem.ReadAt(b, int64(addr)); err != nil {
				return nil, err
			}
			return b, nil
		},
		write: func(addr uint64, b []byte) error {
			if !idValid(listener, n.ID) {
				return errors.New("caller gone")
			}
			_, err := mem.WriteAt(b, int64(addr))
			return err
		},
	}
	return k.ioctl(c, uint32(n.Data.Args[1]), n.Data.Args[2]), true
}

// procInfo reads the thread's process id, start time and name.
func procInfo(tid int) (tgid int, start, comm string, err error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", tid))
	if err != nil {
		return 0, "", "", err
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, found := strings.CutPrefix(line, "Tgid:"); found {
			tgid, _ = strconv.Atoi(strings.TrimSpace(v))
		}
		if v, found := strings.CutPrefix(line, "Name:"); found {
			comm = strings.TrimSpace(v)
		}
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", tgid))
	if err != nil {
		return 0, "", "", err
	}
	// Field 22 (starttime) counts after the parenthesised name.
	if i := bytes.LastIndexByte(stat, ')'); i >= 0 {
		f := strings.Fields(string(stat[i+1:]))
		if len(f) > 19 {
			start = f[19]
		}
	}
	return tgid, start, comm, nil
}

// sendFD passes fd over a unix socket.
func sendFD(sock int, fd int) error {
	return unix.Sendmsg(sock, []byte{0}, unix.UnixRights(fd), nil, 0)
}

// recvFD receives one fd from a unix socket.
func recvFD(sock int) (int, error) {
	buf := make([]byte, 1)
	oob := make([]byte, unix.CmsgSpace(4))
	_, oobn, _, _, err := unix.Recvmsg(sock, buf, oob, 0)
	if err != nil {
		return -1, err
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return -1, fmt.Errorf("no fd in message: %v", err)
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		return -1, fmt.Errorf("no fd in message: %v", err)
	}
	return fds[0], nil
}
