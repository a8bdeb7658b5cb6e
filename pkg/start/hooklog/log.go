package hooklog

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Level is how much a logger writes; an entry is written when its level is
// at most the logger's. The order and names are logrus's, which the
// configuration's log_level takes.
type Level uint8

const (
	// Panic and Fatal write nothing the hook logs: the hook never logs at
	// them, so they silence its errors too, as with logrus.
	Panic Level = iota
	Fatal
	Error
	Warn
	Info
	Debug
	// Trace is Debug: the hook has no trace entries.
	Trace
)

var levelNames = [...]string{Panic: "panic", Fatal: "fatal", Error: "error", Warn: "warning", Info: "info", Debug: "debug", Trace: "trace"}

// ParseLevel reads a level name as log_level takes it: a logrus level name
// (panic, fatal, error, warn, warning, info, debug, trace), in any case.
func ParseLevel(name string) (Level, error) {
	if strings.EqualFold(name, "warn") {
		return Warn, nil
	}
	for l, n := range levelNames {
		if strings.EqualFold(name, n) {
			return Level(l), nil
		}
	}
	return Info, fmt.Errorf("log level %q is not one of panic, fatal, error, warn, warning, info, debug, trace", name)
}

// Logger writes entries with its fields. The zero value is not usable: make
// one with [New], [Open] or [Discard]. Loggers derived with [Logger.With]
// share their output and are safe for concurrent use.
type Logger struct {
	out *output
	// fields are the logger's fields, sorted by key (clashing keys
	// already renamed), and suffix is them rendered as the line's tail,
	// " key=value" each.
	fields []field
	suffix string
}

type field struct{ key, value string }

// output is where loggers sharing it write, and its reused buffers.
type output struct {
	w     io.Writer // nil: discard
	level Level
	close func() error // Close's; nil if w is not ours
	// syslogTag, when set, makes entries syslog messages (OpenSyslog).
	syslogTag string
	now       func() time.Time

	mu     sync.Mutex
	closed bool
	line   []byte // the entry being rendered
	msg    []byte // its message, formatted before it is known whether to quote it
}

// New returns a logger writing entries up to level to w, one Write each.
// A nil w discards everything.
func New(w io.Writer, level Level) *Logger {
	return &Logger{out: &output{w: w, level: level, now: time.Now}}
}

// Discard returns a logger that writes and formats nothing.
func Discard() *Logger { return New(nil, Panic) }

// Open returns a logger appending entries up to level to the file at path,
// which it creates (mode 0640) if missing; "" discards. The file is vetted
// as [OpenFile] vets it; a refusal is a *RefusedError naming log_file, one
// line saying why and what to do. On error the logger is one that
// discards, for the caller to use anyway: a log that cannot be written
// must not cost the user their GPU.
func Open(path string, level Level) (*Logger, error) {
	if path == "" {
		return Discard(), nil
	}
	// O_APPEND makes each write land whole at the end, even when many
	// hooks log at once. The descriptor is written with write(2), not
	// wrapped in an os.File, which would hand it to the runtime's network
	// poller (fcntl and epoll calls, and the poller's setup when it is the
	// process's first file), which a regular file does not use.
	fd, err := openFD(path)
	if err != nil {
		if r, ok := err.(*RefusedError); ok {
			r.Setting = "log_file"
		}
		return Discard(), err
	}
	l := New(fdWriter(fd), level)
	l.out.close = func() error { return unix.Close(fd) }
	return l, nil
}

// Close closes the file [Open] opened, for this logger and every logger
// derived from it; later entries are discarded.
func (l *Logger) Close() error {
	o := l.out
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.close == nil || o.closed {
		return nil
	}
	o.closed = true
	return o.close()
}

// With returns a logger that adds the field key=value to every entry; a
// key the logger has already is replaced. Keys are constants of the
// caller's; values may be anything, and are quoted as the line needs.
func (l *Logger) With(key, value string) *Logger {
	switch key {
	case "time", "level", "msg", "logrus_error":
		key = "fields." + key
	}
	fields := slices.Clone(l.fields)
	i, found := slices.BinarySearchFunc(fields, key, func(f field, key string) int { return strings.Compare(f.key, key) })
	if found {
		fields[i].value = value
	} else {
		fields = slices.Insert(fields, i, field{key, value})
	}
	var b []byte
	for _, f := range fields {
		b = append(b, ' ')
		b = append(b, f.key...)
		b = append(b, '=')
		b = appendValue(b, f.value)
	}
	return &Logger{out: l.out, fields: fields, suffix: string(b)}
}

// Enabled reports whether an entry at level would be written, for callers
// that would do work only to log it.
func (l *Logger) Enabled(level Level) bool {
	return l.out.w != nil && level <= l.out.level
}

// Debugf logs a step, formatted as fmt.Sprintf does.
func (l *Logger) Debugf(format string, args ...any) {
	if l.Enabled(Debug) {
		l.out.write(Debug, l.suffix, format, args)
	}
}

// Infof logs what was decided or done.
func (l *Logger) Infof(format string, args ...any) {
	if l.Enabled(Info) {
		l.out.write(Info, l.suffix, format, args)
	}
}

// Warnf logs what the user should know and may want to fix.
func (l *Logger) Warnf(format string, args ...any) {
	if l.Enabled(Warn) {
		l.out.write(Warn, l.suffix, format, args)
	}
}

// Errorf logs why the hook failed.
func (l *Logger) Errorf(format string, args ...any) {
	if l.Enabled(Error) {
		l.out.write(Error, l.suffix, format, args)
	}
}

// write renders one entry and writes it in one Write. Write errors are
// dropped: a full disk must not fail a container start, nor print on
// stderr, which is the runtime's line to the user.
func (o *output) write(level Level, suffix, format string, args []any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return
	}
	if o.line == nil { // most entries fit: no growing them byte by byte
		o.line, o.msg = make([]byte, 0, 1024), make([]byte, 0, 1024)
	}
	o.msg = fmt.Appendf(o.msg[:0], format, args...)
	b := o.line[:0]
	if o.syslogTag != "" {
		b = appendSyslogHeader(b, o.syslogTag, level)
		b = append(b, "level="...)
	} else {
		b = append(b, `time="`...)
		b = o.now().UTC().AppendFormat(b, time.RFC3339)
		b = append(b, `" level=`...)
	}
	b = append(b, levelNames[level]...)
	if len(o.msg) > 0 { // logrus leaves out an empty msg
		b = append(b, " msg="...)
		// Equivalent to string(o.msg) without copying it: o.msg is not
		// written while the string is in use.
		b = appendValue(b, unsafe.String(unsafe.SliceData(o.msg), len(o.msg)))
	}
	b = append(b, suffix...)
	if o.syslogTag == "" {
		b = append(b, '\n')
	}
	o.line = b
	_, _ = o.w.Write(b) // see above
}

// appendValue appends s bare if it is made of characters that never need
// quoting, else quoted as strconv.Quote does: logrus's rule.
func appendValue(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if !bare(s[i]) {
			return appendQuoted(b, s)
		}
	}
	return append(b, s...)
}

// appendQuoted is strconv.AppendQuote(b, s), but copies runs of printable
// ASCII other than '"' and '\\' as they are, where strconv takes every
// rune on its own (half the cost of an entry with a long message). The
// runs in between go through strconv; splitting s at ASCII bytes never
// splits a UTF-8 sequence, so they quote as they would in one piece.
func appendQuoted(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); {
		j := i
		for j < len(s) && plain(s[j]) {
			j++
		}
		b = append(b, s[i:j]...)
		i = j
		for j < len(s) && !plain(s[j]) {
			j++
		}
		if j > i {
			n := len(b)
			b = strconv.AppendQuote(b, s[i:j])
			b = append(b[:n], b[n+1:len(b)-1]...) // strconv's quotes
			i = j
		}
	}
	return append(b, '"')
}

// plain is a byte strconv.Quote copies as it is.
func plain(c byte) bool {
	return ' ' <= c && c < 0x7f && c != '"' && c != '\\'
}

func bare(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	switch c {
	case '-', '.', '_', '/', '@', '^', '+':
		return true
	}
	return false
}
