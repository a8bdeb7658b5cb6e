package supervise

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/dxgsim/internal/dxg"
	"golang.org/x/sys/unix"
)

// caller identifies the process of thread tid.
func caller(tid int) (dxg.Caller, error) {
	tgid, err := tgidOf(tid)
	if err != nil {
		return dxg.Caller{}, err
	}
	st, err := readStat(tgid)
	if err != nil {
		return dxg.Caller{}, err
	}
	return dxg.Caller{Process: dxg.Process{TGID: tgid, Start: st.start}, Comm: st.comm}, nil
}

// tgidOf reads the thread group id of a thread: the notification carries
// the thread's id, but handles belong to the process.
func tgidOf(tid int) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", tid))
	if err != nil {
		return 0, fmt.Errorf("identify caller: %w", err)
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("Tgid:")); ok {
			n, err := strconv.Atoi(string(bytes.TrimSpace(v)))
			if err != nil {
				return 0, fmt.Errorf("parse /proc/%d/status Tgid %q: %w", tid, v, err)
			}
			return n, nil
		}
	}
	return 0, fmt.Errorf("/proc/%d/status has no Tgid line", tid)
}

type stat struct {
	comm  string
	state byte
	start uint64
}

// readStat parses the fields of /proc/<pid>/stat that dxgsim needs. comm
// may hold spaces and parentheses, so fields are counted from the last ')'.
func readStat(pid int) (stat, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return stat{}, fmt.Errorf("read process start time: %w", err)
	}
	return parseStat(string(b))
}

func parseStat(s string) (stat, error) {
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return stat{}, fmt.Errorf("malformed /proc stat %q", s)
	}
	f := strings.Fields(s[end+1:])
	// f[0] is field 3 (state); starttime is field 22.
	if len(f) < 20 || len(f[0]) != 1 {
		return stat{}, fmt.Errorf("malformed /proc stat %q", s)
	}
	start, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return stat{}, fmt.Errorf("parse start time in /proc stat: %w", err)
	}
	return stat{comm: s[open+1 : end], state: f[0][0], start: start}, nil
}

// alive reports whether p is still running (not a zombie, not replaced by
// another process with the same pid).
func alive(p dxg.Process) bool {
	st, err := readStat(p.TGID)
	return err == nil && st.start == p.Start && st.state != 'Z' && st.state != 'X'
}

// isNode reports whether fd of thread tid is a character device with
// device number rdev. An fd that cannot be inspected is not the node.
func isNode(tid int, fd uint32, rdev uint64) bool {
	var st unix.Stat_t
	if err := unix.Stat(fmt.Sprintf("/proc/%d/fd/%d", tid, fd), &st); err != nil {
		return false
	}
	return st.Mode&unix.S_IFMT == unix.S_IFCHR && st.Rdev == rdev
}

// holdsNode reports whether process pid has an fd on a character device
// with device number rdev. A process that cannot be inspected (it exited
// meanwhile) holds nothing: exit released its files.
func holdsNode(pid int, rdev uint64) bool {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return false
	}
	for _, e := range ents {
		fd, err := strconv.ParseUint(e.Name(), 10, 32)
		if err == nil && isNode(pid, uint32(fd), rdev) {
			return true
		}
	}
	return false
}

// memory is a thread's address space. process_vm_readv/writev obey page
// protections like copy_from_user/copy_to_user, so a read-only output
// buffer faults as it would against the real driver.
type memory int

func (m memory) Read(addr uint64, b []byte) error {
	if len(b) == 0 {
		return nil
	}
	local := []unix.Iovec{{Base: &b[0]}}
	local[0].SetLen(len(b))
	n, err := unix.ProcessVMReadv(int(m), local, []unix.RemoteIovec{{Base: uintptr(addr), Len: len(b)}}, 0)
	if err != nil {
		return err
	}
	if n != len(b) {
		return unix.EFAULT
	}
	return nil
}

func (m memory) Write(addr uint64, b []byte) error {
	if len(b) == 0 {
		return nil
	}
	local := []unix.Iovec{{Base: &b[0]}}
	local[0].SetLen(len(b))
	n, err := unix.ProcessVMWritev(int(m), local, []unix.RemoteIovec{{Base: uintptr(addr), Len: len(b)}}, 0)
	if err != nil {
		return err
	}
	if n != len(b) {
		return unix.EFAULT
	}
	return nil
}
