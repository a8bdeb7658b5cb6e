// Package hooklog is the hook's log: leveled entries with a few fixed
// fields, one line each, appended to the configured file.
//
// It replaces logrus on the hook's path because the hook runs on every
// container start: logrus's logger, its TextFormatter (field maps copied,
// keys sorted, values through fmt) and the local time zone it loads from
// /etc/localtime on first use cost about half a millisecond per start, and
// its code and package initialisation are in every start's binary. A
// Logger renders its fields once, when [Logger.With] adds them, and an
// entry is the time, the level, the message and those fields appended to
// one reused buffer.
//
// The line is the one logrus's TextFormatter{DisableColors: true,
// FullTimestamp: true} prints, byte for byte (a test holds it to logrus),
// but for the time zone:
//
//	time="2026-11-26T10:29:37Z" level=info msg="GPU ready in /run/c/rootfs" bundle=/run/c pid=4242 stage=prestart
//
// The time is UTC, where logrus used the local zone: a hook's environment
// rarely sets TZ, so its zone came from /etc/localtime, a file read on every
// start for a field whose offset no reader uses (wsl-gpu-ctl doctor parses
// it as RFC 3339 with any offset). UTC also keeps the lines of hooks run
// from engines with different TZ settings in one order.
//
// Invariants:
//
//   - A value (the message, a field) made only of ASCII letters, digits and
//     -._/@^+ is written bare; any other is quoted as strconv.Quote quotes it,
//     as logrus does, so a newline, carriage return, quote or non-printable
//     character in a hostile string (a bundle path, a value from
//     config.json, a path in the rootfs) is escaped and cannot end the line
//     or forge a field or a second entry.
//   - Each entry is one Write of one whole line. On a file opened by [Open]
//     (O_APPEND) that is one write(2), so entries of hooks logging at once
//     land whole.
//   - An entry below the level is not formatted: its arguments are not
//     even turned into strings. A logger with no output (log_file = "", a
//     file that cannot be opened) formats nothing.
//   - Nothing a log does can fail a container start: open and write errors
//     leave the entry unwritten, and a logger never writes stderr, which
//     runtimes show users. A log file [Open] refuses is one error, one line
//     saying why and what to do, for the caller to print.
//   - The hook runs as root and its log's directory may be writable by
//     others (Ubuntu's /var/log is group syslog's): the file is opened
//     without following a link and written only if the open file is a
//     regular file with one link, the process user's, not writable by group
//     or others, in a directory everyone may write only if it is sticky
//     ([OpenFile]). The runtime wrapper opens runc's --log the same way.
//   - A hook in a user namespace of its own (a CDI hook in a container
//     with one runs as the container's root) cannot open root's log: its
//     warnings and errors go to syslog ([OpenSyslog], [OpenHook]), where
//     journald records who sent them.
//
// Field keys are the caller's constants, written bare like logrus writes
// them; a key that would clash with time, level or msg is renamed
// fields.<key>, as logrus does.
//
// It is not a general logger: no hooks, formatters, caller reporting or
// panics; wsl-gpu-ctl and the device plugin, which are not on the start
// path, need none of it either way.
package hooklog
