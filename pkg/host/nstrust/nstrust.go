package nstrust

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/smallfile"
)

// Where the kernel tells the caller's uid map and the overflow uid.
const (
	UIDMapPath      = "/proc/self/uid_map"
	OverflowUIDPath = "/proc/sys/kernel/overflowuid"
)

// ErrNotTrusted is the error (errors.Is) for a file something in the
// namespace can have written.
var ErrNotTrusted = errors.New("something in the user namespace can have written it")

// Namespace is the caller's user namespace as its uid map describes it.
type Namespace struct {
	uids     []idRange
	overflow uint32
}

// idRange is one line of a uid map: count ids from inside, as outside.
type idRange struct{ inside, outside, count uint32 }

// maxMap bounds a uid map: the kernel allows 340 lines of three ids each.
const maxMap = 340 * 34

// Current reads the caller's namespace.
func Current() (*Namespace, error) {
	m, err := smallfile.Read(UIDMapPath, maxMap)
	if err != nil {
		return nil, err
	}
	o, err := smallfile.Read(OverflowUIDPath, 32)
	if err != nil {
		return nil, err
	}
	return Parse(m, o)
}

// Parse reads a uid map and an overflow uid as the kernel prints them.
func Parse(uidMap, overflowUID []byte) (*Namespace, error) {
	o, err := strconv.ParseUint(string(bytes.TrimSpace(overflowUID)), 10, 32)
	if err != nil {
		return nil, fmt.Errorf("overflow uid %q: %w", overflowUID, err)
	}
	ns := &Namespace{overflow: uint32(o)}
	for _, line := range strings.Split(strings.TrimSpace(string(uidMap)), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			return nil, fmt.Errorf("uid map line %q: not three numbers", line)
		}
		var r [3]uint32
		for i, s := range f {
			n, err := strconv.ParseUint(s, 10, 32)
			if err != nil {
				return nil, fmt.Errorf("uid map line %q: %w", line, err)
			}
			r[i] = uint32(n)
		}
		// Ids run to 4294967294: 4294967295 is (uid_t)-1.
		if r[2] == 0 || uint64(r[0])+uint64(r[2]) > 1<<32-1 || uint64(r[1])+uint64(r[2]) > 1<<32-1 {
			return nil, fmt.Errorf("uid map line %q: not a range", line)
		}
		ns.uids = append(ns.uids, idRange{r[0], r[1], r[2]})
	}
	return ns, nil
}

// Own reports whether the namespace is one of the caller's own: any map
// but the initial namespace's, every id to itself.
func (ns *Namespace) Own() bool {
	return len(ns.uids) != 1 || ns.uids[0] != idRange{0, 0, 4294967295}
}

// Mapped reports whether the namespace maps uid, an id as seen inside.
func (ns *Namespace) Mapped(uid uint32) bool {
	for _, r := range ns.uids {
		if uid >= r.inside && uint64(uid) < uint64(r.inside)+uint64(r.count) {
			return true
		}
	}
	return false
}

// Error is why a file is not trusted; errors.Is(err, ErrNotTrusted).
type Error struct {
	Path, Why string
}

func (e *Error) Error() string { return e.Path + " " + e.Why + ": not trusted in a user namespace" }

// Is makes errors.Is(err, ErrNotTrusted) hold.
func (e *Error) Is(target error) bool { return target == ErrNotTrusted }

// ReadFile returns the content of the regular file at path (absolute,
// clean, with no symbolic link), at most limit bytes, if nothing in the
// namespace can have written it or any directory on its way from /: each
// is owned by a uid the namespace does not map and writable by group and
// others only if it is a sticky directory (see the package doc). A file or
// directory that is missing is an error errors.Is(err, fs.ErrNotExist)
// reports; an untrusted one, ErrNotTrusted.
//
// The walk opens each component relative to the last (O_PATH, O_NOFOLLOW)
// and checks what fstat says of the open descriptor; the file is read
// from the descriptor checked. It is for callers in a user namespace of
// their own: elsewhere the owner an unmapped uid stands for is the
// caller's own.
func (ns *Namespace) ReadFile(path string, limit int) ([]byte, error) {
	if !filepath.IsAbs(path) || filepath.Clean(path) != path || path == "/" {
		return nil, fmt.Errorf("%q is not a clean absolute path of a file", path)
	}
	var fds []int
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	names := strings.Split(path[1:], "/")
	walked := make([]string, 0, len(names)+1)
	var st unix.Stat_t
	for i := -1; i < len(names); i++ {
		p, last := "/", i == len(names)-1
		var fd int
		var err error
		switch {
		case i < 0:
			fd, err = retry(func() (int, error) { return unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0) })
		case last:
			p = path
			fd, err = retry(func() (int, error) {
				return unix.Openat(fds[i], names[i], unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
			})
		default:
			p = "/" + strings.Join(names[:i+1], "/")
			fd, err = retry(func() (int, error) {
				return unix.Openat(fds[i], names[i], unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			})
		}
		if err == unix.ELOOP {
			return nil, &Error{p, "is a symbolic link"}
		}
		if err != nil {
			return nil, &fs.PathError{Op: "open", Path: p, Err: err}
		}
		fds = append(fds, fd)
		walked = append(walked, p)
		if err := unix.Fstat(fd, &st); err != nil {
			return nil, &fs.PathError{Op: "stat", Path: p, Err: err}
		}
		if err := ns.check(p, &st, !last); err != nil {
			return nil, err
		}
	}
	if st.Size > int64(limit) {
		return nil, fmt.Errorf("%s is %d bytes, more than %d", path, st.Size, limit)
	}
	if ns.Mapped(ns.overflow) {
		if err := ns.ownedOutside(walked, fds); err != nil {
			return nil, err
		}
	}
	return smallfile.ReadFD(fds[len(fds)-1], path, st.Size, limit)
}

// check refuses what st describes unless its owner shows as unmapped and
// its mode lets group and others write it only if it is a sticky
// directory.
func (ns *Namespace) check(p string, st *unix.Stat_t, dir bool) error {
	typ := st.Mode & unix.S_IFMT
	switch {
	case dir && typ == unix.S_IFLNK:
		return &Error{p, "is a symbolic link"}
	case dir && typ != unix.S_IFDIR:
		return &Error{p, "is not a directory"}
	case !dir && typ != unix.S_IFREG:
		return &Error{p, "is not a regular file"}
	case st.Uid != ns.overflow:
		return &Error{p, fmt.Sprintf("is owned by uid %d of the namespace", st.Uid)}
	case st.Mode&0o022 != 0 && !(dir && st.Mode&unix.S_ISVTX != 0):
		return &Error{p, fmt.Sprintf("is writable by group or others (mode %04o)", st.Mode&0o7777)}
	}
	return nil
}

// ownedOutside tells, where the namespace maps the overflow uid itself,
// that each walked descriptor's owner is not the namespace's overflow uid,
// which stat shows the same as an unmapped one: on a thread of its own
// whose file system uid is that uid, a reopen with O_NOATIME is EPERM for
// an inode it does not own. The thread is discarded after (it stays
// locked), so no other code runs with its uid.
func (ns *Namespace) ownedOutside(walked []string, fds []int) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		uid := int(ns.overflow)
		unix.Setfsuid(uid)
		// setfsuid says only what the previous value was: asked again,
		// it says whether the first call took.
		if prev, _ := unix.SetfsuidRetUid(uid); prev != uid {
			done <- &Error{walked[len(walked)-1], fmt.Sprintf("has an owner that cannot be told from uid %d of the namespace (setfsuid refused)", uid)}
			return
		}
		for i, fd := range fds {
			fd, err := retry(func() (int, error) {
				return unix.Open("/proc/self/fd/"+strconv.Itoa(fd), unix.O_RDONLY|unix.O_NOATIME|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
			})
			switch err {
			case unix.EPERM:
				continue
			case nil:
				unix.Close(fd)
				done <- &Error{walked[i], fmt.Sprintf("is owned by uid %d of the namespace", uid)}
			default:
				done <- &Error{walked[i], fmt.Sprintf("has an owner that cannot be told from uid %d of the namespace: %v", uid, err)}
			}
			return
		}
		done <- nil
	}()
	return <-done
}

func retry(open func() (int, error)) (int, error) {
	for {
		fd, err := open()
		if err != unix.EINTR {
			return fd, err
		}
	}
}
