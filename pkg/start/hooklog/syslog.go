package hooklog

import (
	"errors"
	"io/fs"
	"strconv"

	"golang.org/x/sys/unix"
)

// OpenSyslog returns a logger sending entries up to level to the syslog
// socket at path (/dev/log), one datagram each: "<PRI>tag: level=... msg=...
// fields", facility daemon, the severity the entry's level. No time (the
// daemon stamps each message) and no pid: a hook in a container's pid
// namespace knows only its pid there, and journald records the sender's
// pid, uid and cgroup from the socket itself (SCM_CREDENTIALS), which the
// sender cannot forge. The socket does not block: a message the daemon has
// no room for is dropped, and a start never waits on a log.
func OpenSyslog(path, tag string, level Level) (*Logger, error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		return Discard(), &fs.PathError{Op: "socket", Path: path, Err: err}
	}
	for {
		err = unix.Connect(fd, &unix.SockaddrUnix{Name: path})
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		unix.Close(fd)
		return Discard(), &fs.PathError{Op: "connect", Path: path, Err: err}
	}
	l := New(fdWriter(fd), level)
	l.out.syslogTag = tag
	l.out.close = func() error { return unix.Close(fd) }
	return l, nil
}

// syslog severities (RFC 5424) and the daemon facility.
const (
	facilityDaemon = 3 << 3
	sevErr         = 3
	sevWarning     = 4
	sevInfo        = 6
	sevDebug       = 7
)

// appendSyslogHeader starts a syslog message for an entry at level.
func appendSyslogHeader(b []byte, tag string, level Level) []byte {
	sev := sevDebug
	switch level {
	case Panic, Fatal, Error:
		sev = sevErr
	case Warn:
		sev = sevWarning
	case Info:
		sev = sevInfo
	}
	b = append(b, '<')
	b = strconv.AppendInt(b, int64(facilityDaemon|sev), 10)
	b = append(b, '>')
	b = append(b, tag...)
	return append(b, ": "...)
}

// HookOptions say where a hook logs.
type HookOptions struct {
	File string // log_file; "" disables the log
	// Syslog is the syslog socket (log_syslog) for a hook that cannot
	// write File; "" is none.
	Syslog, Tag string
	Level       Level
	// UserNS: the hook runs in a user namespace of its own (a container's,
	// a rootless engine's), where root's log file is not its to open.
	UserNS bool
}

// OpenHook opens a hook's log: File, else Syslog. A hook in a user
// namespace of its own (a CDI hook in a container with one, as its root)
// cannot open root's log; its warnings and errors go to syslog, where an
// administrator reads them, and no more: journald's rate limit is the
// engine's unit's, and a line for every start would crowd out the
// engine's own. A log File refused for any other reason (a link, a file
// others may write: see OpenFile) is said on syslog too, and the error
// returned is the line for stderr. With no syslog either, failures still
// reach stderr, which the runtime shows the user.
func OpenHook(o HookOptions) (*Logger, error) {
	l, err := Open(o.File, o.Level)
	if err == nil || o.File == "" {
		return l, err
	}
	quiet := o.UserNS && errors.Is(err, fs.ErrPermission)
	if o.Syslog != "" {
		if sl, serr := OpenSyslog(o.Syslog, o.Tag, min(o.Level, Warn)); serr == nil {
			l = sl
			if !quiet {
				l.Warnf("%v", err)
			}
		}
	}
	if quiet {
		return l, nil
	}
	return l, err
}
