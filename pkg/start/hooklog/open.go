package hooklog

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// RefusedError is why a log is not written: the file could not be opened,
// or is not one the process may trust with its entries.
type RefusedError struct {
	Path string
	Why  string // "is a symlink"
	Fix  string // what to do about it: "remove it"; "" when only Setting helps
	// Setting, when not "", is the configuration key that chose Path,
	// offered as the other way out.
	Setting string
	Err     error // the system call's error, when one refused it
}

func (e *RefusedError) Error() string {
	s := "log " + e.Path + ": " + e.Why + ": not writing it"
	switch {
	case e.Fix != "" && e.Setting != "":
		s += "; " + e.Fix + " or set " + e.Setting
	case e.Fix != "":
		s += "; " + e.Fix
	case e.Setting != "":
		s += "; set " + e.Setting
	}
	return s
}

func (e *RefusedError) Unwrap() error { return e.Err }

// OpenFile opens path to append log entries to, creating it (mode 0640) if
// missing, and returns it only if nothing but a log of this user's own can
// receive the entries. Equivalent to
//
//	os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
//
// but safe in a directory others may write, as a hook running as root
// logs to: Ubuntu's /var/log is writable by group syslog, whose members
// could otherwise plant a link there and have root append to any file.
// See openFD for the rules. Errors are *RefusedError.
func OpenFile(path string) (*os.File, error) {
	fd, err := openFD(path)
	if err != nil {
		return nil, err
	}
	// os.NewFile would hand a descriptor with O_NONBLOCK to the runtime's
	// poller; on a regular file the flag does nothing anyway.
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFL, unix.O_APPEND); err != nil {
		unix.Close(fd)
		return nil, refused(path, "set its flags: "+errText(err), "", err)
	}
	return os.NewFile(uintptr(fd), path), nil
}

// openFD opens path for appending and vets it:
//
//   - its directory is opened first and the file relative to it, so the
//     directory checked is the one the file is in. A directory everyone
//     may write is refused unless it is sticky: anyone could rename a file
//     of root's there into the log's place. A group-writable one (Ubuntu's
//     /var/log, root:syslog 0775) is accepted: its group may replace or
//     remove the log, which no check here could prevent, but every
//     replacement is refused below but a single-link regular file of this
//     user's that no one else may write, which the group cannot make.
//   - the last component is never followed (O_NOFOLLOW): a symbolic link
//     is refused. O_NONBLOCK keeps a FIFO from blocking the open.
//   - the open file (fstat: what is checked is what is written) must be a
//     regular file with one link (a hard link would be another file's
//     name too), owned by this user (root, for a hook), not writable by
//     group or others.
//
// Five system calls, against one for a plain open.
func openFD(path string) (int, error) {
	dir, base := filepath.Dir(path), filepath.Base(path)
	dfd, err := retry(func() (int, error) {
		return unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	})
	if err != nil {
		fix := ""
		if err == unix.ENOENT {
			fix = "mkdir -p " + dir
		}
		return -1, refused(path, "open: "+errText(err), fix, err)
	}
	defer unix.Close(dfd)
	var st unix.Stat_t
	if err := unix.Fstat(dfd, &st); err != nil {
		return -1, refused(path, "stat its directory: "+errText(err), "", err)
	}
	if st.Mode&0o002 != 0 && st.Mode&unix.S_ISVTX == 0 {
		return -1, refused(path, fmt.Sprintf("its directory %s is writable by everyone and not sticky", dir), fmt.Sprintf("chmod o-w %s (or +t)", dir), nil)
	}
	fd, err := retry(func() (int, error) {
		return unix.Openat(dfd, base, unix.O_WRONLY|unix.O_APPEND|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0o640)
	})
	switch err {
	case nil:
	case unix.ELOOP:
		return -1, refused(path, "is a symlink", "remove it", err)
	case unix.EISDIR, unix.ENXIO: // a directory; a FIFO with no reader
		return -1, refused(path, "is not a regular file", "remove it", err)
	default:
		return -1, refused(path, "open: "+errText(err), "", err)
	}
	if err := vet(path, fd); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// vet refuses the open log fd unless it is a regular file with one link,
// this user's, and no one else may write it.
func vet(path string, fd int) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return refused(path, "stat: "+errText(err), "", err)
	}
	euid := os.Geteuid()
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return refused(path, "is not a regular file", "remove it", nil)
	case st.Nlink != 1:
		return refused(path, fmt.Sprintf("has %d links", st.Nlink), "remove it", nil)
	case int(st.Uid) != euid:
		who := "root"
		if euid != 0 {
			who = fmt.Sprintf("uid %d", euid)
		}
		return refused(path, fmt.Sprintf("is owned by uid %d, not %s", st.Uid, who), "remove it", nil)
	case st.Mode&0o022 != 0:
		return refused(path, fmt.Sprintf("is writable by group or others (mode %04o)", st.Mode&0o7777), "chmod go-w "+path, nil)
	}
	return nil
}

func refused(path, why, fix string, err error) *RefusedError {
	return &RefusedError{Path: path, Why: why, Fix: fix, Err: err}
}

// errText is an errno's text as the os package prints it.
func errText(err error) string {
	if e, ok := err.(unix.Errno); ok {
		return e.Error()
	}
	return err.Error()
}

func retry(open func() (int, error)) (int, error) {
	for {
		fd, err := open()
		if err != unix.EINTR {
			return fd, err
		}
	}
}

// fdWriter writes to a descriptor with write(2): the log's file needs
// nothing of os.File.
type fdWriter int

func (fd fdWriter) Write(b []byte) (int, error) {
	for {
		n, err := unix.Write(int(fd), b)
		if err != unix.EINTR {
			return n, err
		}
	}
}
