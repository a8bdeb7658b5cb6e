package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// call is one system call at its entry: its number and arguments, as the
// registers hold them.
type call struct {
	Nr   int32
	Args [6]uint64
}

// caller is what classify reads of the thread that made a call.
type caller interface {
	// str reads the NUL-terminated string at addr in its memory.
	str(addr uint64) (string, error)
	// u64 reads the 8 bytes at addr.
	u64(addr uint64) (uint64, error)
	// fdPath names its descriptor fd (AT_FDCWD: its working directory).
	fdPath(fd int32) (string, error)
	// regular reports whether fd is open on a regular file.
	isRegular(fd int32) bool
}

// ref is one thing a call names: a path relative to a directory
// descriptor, a path relative to the working directory (dirfd cwd), a
// descriptor alone (path none) or a string shown as it is (dirfd literal).
type ref struct{ dirfd, path int }

const (
	cwd     = -1 // no dirfd argument: AT_FDCWD
	literal = -2 // the path argument is shown unresolved (a link's text)
	none    = -1 // no path argument: the dirfd argument is a descriptor
)

// spec is how a call that may be a step is shown and whether it is a step.
type spec struct {
	name string
	refs []ref
	// when, if set, decides whether the call is a step; it returns a note
	// for the description.
	when func(c caller, d call, skip []string, refs []string) (string, bool)
}

// openMask are the open flags that change a file system.
const openMask = unix.O_CREAT | unix.O_TRUNC | (unix.O_TMPFILE &^ unix.O_DIRECTORY)

func openFlags(flagArg int) func(caller, call, []string, []string) (string, bool) {
	return func(_ caller, d call, _ []string, _ []string) (string, bool) {
		return flagNote(d.Args[flagArg])
	}
}

func flagNote(flags uint64) (string, bool) {
	var names []string
	for _, f := range []struct {
		bit  uint64
		name string
	}{{unix.O_CREAT, "O_CREAT"}, {unix.O_TRUNC, "O_TRUNC"}, {unix.O_TMPFILE &^ unix.O_DIRECTORY, "O_TMPFILE"}} {
		if flags&f.bit != 0 {
			names = append(names, f.name)
		}
	}
	return strings.Join(names, "|"), flags&openMask != 0
}

// openat2's flags are the first field of the struct open_how it points to.
func openHow(c caller, d call, _ []string, _ []string) (string, bool) {
	flags, err := c.u64(d.Args[2])
	if err != nil {
		return "open_how unreadable", true
	}
	return flagNote(flags)
}

// fileWrite counts writes to regular files other than the skipped ones.
func fileWrite(c caller, d call, skip []string, refs []string) (string, bool) {
	if !c.isRegular(int32(d.Args[0])) || slices.Contains(skip, refs[0]) {
		return "", false
	}
	return strconv.FormatUint(d.Args[2], 10) + " bytes", true
}

func pair(a, b int) []ref { return []ref{{a, a + 1}, {b, b + 1}} }

// calls are the system calls that may be steps (x86_64 numbers).
var calls = map[int32]spec{
	unix.SYS_MKDIR:         {name: "mkdir", refs: []ref{{cwd, 0}}},
	unix.SYS_MKDIRAT:       {name: "mkdirat", refs: []ref{{0, 1}}},
	unix.SYS_MKNOD:         {name: "mknod", refs: []ref{{cwd, 0}}},
	unix.SYS_MKNODAT:       {name: "mknodat", refs: []ref{{0, 1}}},
	unix.SYS_SYMLINK:       {name: "symlink", refs: []ref{{literal, 0}, {cwd, 1}}},
	unix.SYS_SYMLINKAT:     {name: "symlinkat", refs: []ref{{literal, 0}, {1, 2}}},
	unix.SYS_LINK:          {name: "link", refs: []ref{{cwd, 0}, {cwd, 1}}},
	unix.SYS_LINKAT:        {name: "linkat", refs: pair(0, 2)},
	unix.SYS_RENAME:        {name: "rename", refs: []ref{{cwd, 0}, {cwd, 1}}},
	unix.SYS_RENAMEAT:      {name: "renameat", refs: pair(0, 2)},
	unix.SYS_RENAMEAT2:     {name: "renameat2", refs: pair(0, 2)},
	unix.SYS_UNLINK:        {name: "unlink", refs: []ref{{cwd, 0}}},
	unix.SYS_UNLINKAT:      {name: "unlinkat", refs: []ref{{0, 1}}},
	unix.SYS_RMDIR:         {name: "rmdir", refs: []ref{{cwd, 0}}},
	unix.SYS_CHMOD:         {name: "chmod", refs: []ref{{cwd, 0}}},
	unix.SYS_FCHMOD:        {name: "fchmod", refs: []ref{{0, none}}},
	unix.SYS_FCHMODAT:      {name: "fchmodat", refs: []ref{{0, 1}}},
	unix.SYS_CHOWN:         {name: "chown", refs: []ref{{cwd, 0}}},
	unix.SYS_LCHOWN:        {name: "lchown", refs: []ref{{cwd, 0}}},
	unix.SYS_FCHOWN:        {name: "fchown", refs: []ref{{0, none}}},
	unix.SYS_FCHOWNAT:      {name: "fchownat", refs: []ref{{0, 1}}},
	unix.SYS_TRUNCATE:      {name: "truncate", refs: []ref{{cwd, 0}}},
	unix.SYS_FTRUNCATE:     {name: "ftruncate", refs: []ref{{0, none}}},
	unix.SYS_FALLOCATE:     {name: "fallocate", refs: []ref{{0, none}}},
	unix.SYS_MOUNT:         {name: "mount", refs: []ref{{literal, 0}, {cwd, 1}}},
	unix.SYS_UMOUNT2:       {name: "umount2", refs: []ref{{cwd, 0}}},
	unix.SYS_OPEN_TREE:     {name: "open_tree", refs: []ref{{0, 1}}},
	unix.SYS_MOVE_MOUNT:    {name: "move_mount", refs: pair(0, 2)},
	unix.SYS_MOUNT_SETATTR: {name: "mount_setattr", refs: []ref{{0, 1}}},
	unix.SYS_OPEN:          {name: "open", refs: []ref{{cwd, 0}}, when: openFlags(1)},
	unix.SYS_OPENAT:        {name: "openat", refs: []ref{{0, 1}}, when: openFlags(2)},
	unix.SYS_OPENAT2:       {name: "openat2", refs: []ref{{0, 1}}, when: openHow},
	unix.SYS_WRITE:         {name: "write", refs: []ref{{0, none}}, when: fileWrite},
	unix.SYS_PWRITE64:      {name: "pwrite64", refs: []ref{{0, none}}, when: fileWrite},
	unix.SYS_WRITEV:        {name: "writev", refs: []ref{{0, none}}, when: fileWrite},
	unix.SYS_PWRITEV:       {name: "pwritev", refs: []ref{{0, none}}, when: fileWrite},
	unix.SYS_PWRITEV2:      {name: "pwritev2", refs: []ref{{0, none}}, when: fileWrite},
}

// classify describes the call d made by c and reports whether it is a
// step. What cannot be read of the caller is shown as such and counts:
// a test would rather kill once too often than miss a step.
func classify(c caller, d call, skip []string) (string, bool) {
	sp, ok := calls[d.Nr]
	if !ok {
		return fmt.Sprintf("syscall %d", d.Nr), false
	}
	names := make([]string, len(sp.refs))
	for i, r := range sp.refs {
		names[i] = resolve(c, d, r)
	}
	desc := sp.name + " " + strings.Join(names, " -> ")
	if sp.when == nil {
		return desc, true
	}
	note, step := sp.when(c, d, skip, names)
	if note != "" {
		desc += " (" + note + ")"
	}
	return desc, step
}

func resolve(c caller, d call, r ref) string {
	if r.dirfd == literal {
		if d.Args[r.path] == 0 {
			return "(none)"
		}
		s, err := c.str(d.Args[r.path])
		if err != nil {
			return "(unreadable)"
		}
		return strconv.Quote(s)
	}
	p := ""
	if r.path != none {
		s, err := c.str(d.Args[r.path])
		if err != nil {
			return "(unreadable)"
		}
		if strings.HasPrefix(s, "/") {
			return s
		}
		p = s
	}
	fd := int32(unix.AT_FDCWD)
	if r.dirfd != cwd {
		fd = int32(d.Args[r.dirfd])
	}
	dir, err := c.fdPath(fd)
	if err != nil {
		dir = "(fd " + strconv.Itoa(int(fd)) + ")"
	}
	if p == "" {
		return dir
	}
	return strings.TrimSuffix(dir, "/") + "/" + p
}

// procCaller reads a process through its /proc entry, /proc/PID.
type procCaller string

// procOf returns the /proc entry of the process pid (of stepkill's pid
// namespace). /proc may belong to another namespace: a createContainer
// hook, and stepkill with it, runs in the container's pid namespace but
// sees the host's /proc, where /proc/PID is another process. A pidfd's
// fdinfo, read through /proc/self (which procfs resolves in its own
// namespace, as it does the Pid line), names the process as /proc does.
func procOf(pid int) (procCaller, error) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return "", err
	}
	defer unix.Close(fd)
	info, err := os.ReadFile("/proc/self/fdinfo/" + strconv.Itoa(fd))
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(info), "\n") {
		if v, ok := strings.CutPrefix(line, "Pid:"); ok {
			return procCaller("/proc/" + strings.TrimSpace(v)), nil
		}
	}
	return "", fmt.Errorf("no Pid line in the fdinfo of pidfd %d", fd)
}

func (p procCaller) str(addr uint64) (string, error) {
	f, err := os.Open(string(p) + "/mem")
	if err != nil {
		return "", err
	}
	defer f.Close()
	var out []byte
	buf := make([]byte, 256)
	for len(out) < unix.PathMax {
		n, err := f.ReadAt(buf, int64(addr)+int64(len(out)))
		if i := bytes.IndexByte(buf[:n], 0); i >= 0 {
			return string(append(out, buf[:i]...)), nil
		}
		if err != nil {
			return "", err
		}
		out = append(out, buf[:n]...)
	}
	return "", fmt.Errorf("no NUL within %d bytes", unix.PathMax)
}

func (p procCaller) u64(addr uint64) (uint64, error) {
	f, err := os.Open(string(p) + "/mem")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var b [8]byte
	if _, err := f.ReadAt(b[:], int64(addr)); err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b[:]), nil
}

func (p procCaller) fdPath(fd int32) (string, error) {
	if fd == unix.AT_FDCWD {
		return os.Readlink(string(p) + "/cwd")
	}
	return os.Readlink(string(p) + "/fd/" + strconv.Itoa(int(fd)))
}

func (p procCaller) isRegular(fd int32) bool {
	var st unix.Stat_t
	err := unix.Stat(string(p)+"/fd/"+strconv.Itoa(int(fd)), &st)
	return err == nil && st.Mode&unix.S_IFMT == unix.S_IFREG
}
