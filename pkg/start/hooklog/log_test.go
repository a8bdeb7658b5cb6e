package hooklog

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
)

// at is the time every compared entry is logged at; its fraction is not
// printed.
var at = time.Date(2026, 11, 26, 10, 29, 37, 123456789, time.UTC)

// entry is one call of a logger with fields.
type entry struct {
	level  Level
	format string
	args   []any
}

func e(level Level, format string, args ...any) entry { return entry{level, format, args} }

// render logs entries through a logger of this package at level with
// fields, and returns what it wrote.
func render(level Level, fields [][2]string, entries ...entry) string {
	var buf bytes.Buffer
	l := New(&buf, level)
	l.out.now = func() time.Time { return at }
	for _, f := range fields {
		l = l.With(f[0], f[1])
	}
	for _, e := range entries {
		log := map[Level]func(string, ...any){Debug: l.Debugf, Info: l.Infof, Warn: l.Warnf, Error: l.Errorf}[e.level]
		log(e.format, e.args...)
	}
	return buf.String()
}

// oracle is what the hook's logrus logger wrote for the same entries: a
// logrus.TextFormatter{DisableColors, FullTimestamp}, at UTC.
func oracle(level Level, fields [][2]string, entries ...entry) string {
	var buf bytes.Buffer
	l := logrus.New()
	l.SetOutput(&buf)
	l.SetFormatter(&logrus.TextFormatter{DisableColors: true, FullTimestamp: true})
	l.SetLevel(logrus.Level(level))
	le := logrus.NewEntry(l).WithTime(at)
	for _, f := range fields {
		le = le.WithField(f[0], f[1])
	}
	for _, x := range entries {
		le.Logf(logrus.Level(x.level), x.format, x.args...)
	}
	return buf.String()
}

var hookFields = [][2]string{{"stage", "prestart"}, {"bundle", "/run/containerd/io.containerd.runtime.v2.task/moby/0123abcd"}, {"pid", "4242"}}

// hostile are strings a container controls (its bundle path, values in
// its config.json, paths in its rootfs) that try to end the line or forge
// fields or entries.
var hostile = []string{
	"/run/c\ntime=\"2026-01-01T00:00:00Z\" level=error msg=\"forged\"",
	"/run/c\rlevel=error",
	"/run/c\r\ntime=\"x\" level=error msg=\"forged\"",
	`/run/c" level=error msg="forged`,
	`/run/c\" level=error msg=\"forged`,
	"/run/c level=error",
	"a=b",
	"/run/c\u2028level=error\u2029",
	"/run/c\x85level=error",
	"/run/c\x00\x1b[2Kforged\x7f",
	"/run/c\xff\xfe\n",
	"tab\there",
	"é ünïcode 🙂",
	"",
}

func TestMatchesLogrus(t *testing.T) {
	plan := "plan: cgroup c 10:229: allow in the container's device cgroup; bind /usr/lib/wsl/lib -> /usr/lib/wsl/lib (ro,nosuid,nodev); symlink /usr/bin/nvidia-smi -> /usr/lib/wsl/lib/nvidia-smi (if absent)"
	tests := []struct {
		name    string
		level   Level
		fields  [][2]string
		entries []entry
	}{
		{"plan at info", Info, hookFields, []entry{
			e(Info, "request %s selects %d of %d adapters", "env WSL_GPU_DEVICES", 1, 2),
			e(Info, "%s", plan),
			e(Debug, "apply %s", "bind /usr/lib/wsl/lib"),
			e(Warn, "skip %s: the image has no glibc loader", "/etc/ld.so.cache"),
			e(Info, "GPU ready in %s", "/run/c/rootfs"),
		}},
		{"every level at debug", Debug, hookFields, []entry{
			e(Debug, "apply %s", "step"), e(Info, "i"), e(Warn, "w"), e(Error, "%v", fmt.Errorf("enumerate adapters: %w", os.ErrNotExist)),
		}},
		{"trace is debug", Trace, nil, []entry{e(Debug, "d"), e(Info, "i")}},
		{"warn drops info", Warn, nil, []entry{e(Debug, "d"), e(Info, "i"), e(Warn, "w"), e(Error, "e")}},
		{"error", Error, nil, []entry{e(Info, "i"), e(Warn, "w"), e(Error, "e")}},
		{"fatal drops everything", Fatal, nil, []entry{e(Error, "e")}},
		{"panic drops everything", Panic, nil, []entry{e(Error, "e")}},
		{"bare message", Info, nil, []entry{e(Info, "GPU-ready_1.0/x@y^z+w")}},
		{"empty message has no msg", Info, hookFields, []entry{e(Info, ""), e(Info, "%s", "")}},
		{"message with a trailing newline", Info, nil, []entry{e(Info, "line\n")}},
		{"empty field", Info, [][2]string{{"bundle", ""}}, []entry{e(Info, "x")}},
		{"field replaced", Info, [][2]string{{"pid", "1"}, {"stage", "s"}, {"pid", "2"}}, []entry{e(Info, "x")}},
		{"clashing keys", Info, [][2]string{{"msg", "m"}, {"time", "t"}, {"level", "l"}, {"logrus_error", "e"}, {"a", "b"}}, []entry{e(Info, "x")}},
		{"fields sorted", Info, [][2]string{{"z", "1"}, {"B", "2"}, {"a", "3"}, {"stage", "4"}, {"bundle", "5"}}, []entry{e(Info, "x")}},
		{"no fields", Info, nil, []entry{e(Info, "plain message")}},
	}
	for i, s := range hostile {
		tests = append(tests, struct {
			name    string
			level   Level
			fields  [][2]string
			entries []entry
		}{fmt.Sprintf("hostile %d", i), Info, [][2]string{{"bundle", s}, {"pid", "1"}}, []entry{e(Info, "keep %s", s), e(Warn, "%s", s)}})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, want := render(tt.level, tt.fields, tt.entries...), oracle(tt.level, tt.fields, tt.entries...)
			if got != want {
				t.Errorf("got:\n%s\nlogrus:\n%s", got, want)
			}
		})
	}
}

func FuzzMatchesLogrus(f *testing.F) {
	for _, s := range hostile {
		f.Add(s, s)
	}
	f.Fuzz(func(t *testing.T, msg, value string) {
		fields := [][2]string{{"bundle", value}, {"stage", "prestart"}}
		x := e(Warn, "%s", msg)
		if got, want := render(Info, fields, x), oracle(Info, fields, x); got != want {
			t.Errorf("got:\n%q\nlogrus:\n%q", got, want)
		}
	})
}

// TestNoForgedEntries: whatever a hostile string holds, an entry is one
// line whose fields read back as exactly the ones logged, with their values.
func TestNoForgedEntries(t *testing.T) {
	for _, s := range hostile {
		t.Run(strconv.Quote(s), func(t *testing.T) {
			out := render(Debug, [][2]string{{"stage", "prestart"}, {"bundle", s}, {"pid", "7"}}, e(Info, "env %s", s))
			line, ok := strings.CutSuffix(out, "\n")
			if !ok || strings.ContainsAny(line, "\n\r") || strings.ContainsRune(line, '\u2028') || strings.ContainsRune(line, '\u0085') {
				t.Fatalf("the entry is not one line: %q", out)
			}
			got, err := parseLine(line)
			if err != nil {
				t.Fatalf("%v: %q", err, line)
			}
			msg := "env " + s
			want := [][2]string{{"time", "2026-11-26T10:29:37Z"}, {"level", "info"}, {"msg", msg}, {"bundle", s}, {"pid", "7"}, {"stage", "prestart"}}
			if !slices.Equal(got, want) {
				t.Errorf("read back %q\nwant      %q\nfrom %q", got, want, line)
			}
		})
	}
}

// parseLine reads key=value pairs the way a strict reader of the log
// would: a value is bare up to the next space or quoted Go-style.
func parseLine(line string) ([][2]string, error) {
	var kv [][2]string
	for line != "" {
		key, rest, ok := strings.Cut(line, "=")
		if !ok || key == "" || strings.ContainsAny(key, " \"") {
			return nil, fmt.Errorf("no key=value at %q", line)
		}
		var value string
		if strings.HasPrefix(rest, `"`) {
			q, err := strconv.QuotedPrefix(rest)
			if err != nil {
				return nil, fmt.Errorf("bad quoting at %q: %w", rest, err)
			}
			value, _ = strconv.Unquote(q)
			rest = rest[len(q):]
		} else {
			i := strings.IndexByte(rest, ' ')
			if i < 0 {
				i = len(rest)
			}
			value, rest = rest[:i], rest[i:]
		}
		kv = append(kv, [2]string{key, value})
		if rest == "" {
			break
		}
		if line, ok = strings.CutPrefix(rest, " "); !ok {
			return nil, fmt.Errorf("no space after the value of %s at %q", key, rest)
		}
	}
	return kv, nil
}

func TestParseLevel(t *testing.T) {
	tests := []struct {
		name    string
		want    Level
		wantErr bool
	}{
		{"panic", Panic, false}, {"fatal", Fatal, false}, {"error", Error, false},
		{"warn", Warn, false}, {"warning", Warn, false}, {"WARN", Warn, false},
		{"info", Info, false}, {"Info", Info, false}, {"debug", Debug, false}, {"trace", Trace, false},
		{"loud", Info, true}, {"", Info, true},
	}
	for _, tt := range tests {
		got, err := ParseLevel(tt.name)
		if got != tt.want || (err != nil) != tt.wantErr {
			t.Errorf("ParseLevel(%q) = %v, %v; want %v, error %v", tt.name, got, err, tt.want, tt.wantErr)
		}
		if err == nil {
			if lr, _ := logrus.ParseLevel(tt.name); Level(lr) != got {
				t.Errorf("ParseLevel(%q) = %v, logrus has %v", tt.name, got, lr)
			}
		}
	}
}

// counted is an argument that counts how often it is made a string.
type counted struct{ n *int }

func (c counted) String() string { *c.n++; return "counted" }

// TestBelowLevelNotFormatted: an entry below the level, or for a logger
// with no output, costs no formatting.
func TestBelowLevelNotFormatted(t *testing.T) {
	var buf bytes.Buffer
	tests := []struct {
		name  string
		log   *Logger
		entry func(*Logger, ...any)
	}{
		{"debug at info", New(&buf, Info), func(l *Logger, a ...any) { l.Debugf("apply %s", a...) }},
		{"info at warn", New(&buf, Warn), func(l *Logger, a ...any) { l.Infof("plan: %s", a...) }},
		{"error at fatal", New(&buf, Fatal), func(l *Logger, a ...any) { l.Errorf("%v", a...) }},
		{"no output", New(nil, Debug), func(l *Logger, a ...any) { l.Errorf("%v", a...) }},
		{"discard", Discard(), func(l *Logger, a ...any) { l.Errorf("%v", a...) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := 0
			tt.entry(tt.log.With("stage", "prestart"), counted{&n})
			if n != 0 || buf.Len() != 0 {
				t.Errorf("formatted %d times, wrote %q", n, buf.String())
			}
		})
	}
	n := 0
	New(&buf, Debug).Debugf("apply %s", counted{&n})
	if n != 1 || !strings.Contains(buf.String(), "apply counted") {
		t.Errorf("at its level: formatted %d times, wrote %q", n, buf.String())
	}
}

// writes records each Write.
type writes struct{ calls []string }

func (w *writes) Write(p []byte) (int, error) {
	w.calls = append(w.calls, string(p))
	return len(p), nil
}

// TestOneWritePerEntry: each entry is one Write of one whole line, which
// O_APPEND turns into one write(2) at the end of the file.
func TestOneWritePerEntry(t *testing.T) {
	var w writes
	l := New(&w, Debug).With("stage", "prestart").With("bundle", "/run/c b")
	l.Debugf("apply %s", "x")
	l.Infof("plan: %s", strings.Repeat("bind a -> b; ", 500))
	l.Warnf("w")
	l.Errorf("e\nf")
	if len(w.calls) != 4 {
		t.Fatalf("%d writes for 4 entries: %q", len(w.calls), w.calls)
	}
	for _, c := range w.calls {
		if strings.Count(c, "\n") != 1 || !strings.HasSuffix(c, "\n") || !strings.HasPrefix(c, `time="`) {
			t.Errorf("a write that is not one whole entry: %q", c)
		}
	}
}

// TestConcurrentHooksLandWhole: hooks started together (each its own
// open file, as each is its own process) append whole lines to one log.
func TestConcurrentHooksLandWhole(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hook.log")
	const hooks, entries = 8, 200
	big := strings.Repeat("bind /usr/lib/wsl/drivers/x -> y (ro); ", 100) // ~4 KiB, past a pipe's atomic size
	var wg sync.WaitGroup
	for h := range hooks {
		l, err := Open(path, Info)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		l = l.With("pid", strconv.Itoa(h))
		wg.Go(func() {
			for i := range entries {
				l.Infof("plan %d: %s", i, big)
			}
		})
	}
	wg.Wait()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile(`^time="[^"]+" level=info msg="plan [0-9]+: (bind /usr/lib/wsl/drivers/x -> y \(ro\); ){100}" pid=[0-9]$`)
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	for i, l := range lines {
		if !line.MatchString(l) {
			t.Fatalf("line %d is torn or interleaved: %.200q", i+1, l)
		}
	}
	if len(lines) != hooks*entries {
		t.Errorf("%d lines, want %d", len(lines), hooks*entries)
	}
}

// TestOpen: the file is created 0640 and appended to; a log that cannot be
// opened gives a logger that discards, so the hook goes on.
func TestOpen(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "hook.log")
	if err := os.WriteFile(path, []byte("old\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := Open(path, Info)
	if err != nil {
		t.Fatal(err)
	}
	l.Infof("new")
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l.Infof("after close")
	if err := l.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	data, _ := os.ReadFile(path)
	if !regexp.MustCompile(`^old\ntime="[^"]+Z" level=info msg=new\n$`).Match(data) {
		t.Errorf("log holds %q", data)
	}

	fresh := filepath.Join(dir, "fresh.log")
	l, err = Open(fresh, Info)
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	if fi, err := os.Stat(fresh); err != nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("created log: %v, %v; want mode 0640", fi.Mode(), err)
	}

	for _, bad := range []string{filepath.Join(dir, "missing/hook.log"), dir} {
		l, err = Open(bad, Debug)
		if err == nil || l == nil || l.Enabled(Error) {
			t.Errorf("Open(%q) = %v, %v: want an error and a logger that discards", bad, l, err)
		}
		l.With("stage", "prestart").Errorf("still %s", "fine")
		l.Close()
	}
	if l, err := Open("", Debug); err != nil || l.Enabled(Error) {
		t.Errorf(`Open("") = %v, %v: want a logger that discards`, l, err)
	}
}

// TestEntryReusesBuffers: a logger's entries after the first allocate
// nothing of their own (arguments boxed by the caller aside).
func TestEntryReusesBuffers(t *testing.T) {
	var buf bytes.Buffer
	l := New(&buf, Info).With("stage", "prestart").With("bundle", "/run/c")
	allocs := testing.AllocsPerRun(100, func() {
		buf.Reset()
		l.Infof("GPU ready in /run/c/rootfs with \"quotes\"")
		l.Debugf("apply nothing")
	})
	if allocs != 0 {
		t.Errorf("%v allocations per entry", allocs)
	}
}

// TestTimeIsUTC: the time is UTC whatever the local zone, so no start reads
// /etc/localtime for it.
func TestTimeIsUTC(t *testing.T) {
	local := time.Local
	defer func() { time.Local = local }()
	time.Local = time.FixedZone("UTC+2", 2*3600)
	var buf bytes.Buffer
	New(&buf, Info).Infof("x")
	if !regexp.MustCompile(`^time="\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ" level=info msg=x\n$`).Match(buf.Bytes()) {
		t.Errorf("log line %q: want a UTC time", buf.String())
	}
}

// FuzzQuote: the quoting is strconv.Quote's for any string.
func FuzzQuote(f *testing.F) {
	for _, s := range append(hostile, "a\"b\\c", "\xe2\x80", "x\xe2\x80\xa8y", "\U0010ffff\ufffd", strings.Repeat("ab\x01", 50)) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := string(appendQuoted([]byte("k="), s)), "k="+strconv.Quote(s); got != want {
			t.Errorf("appendQuoted(%q) = %s, want %s", s, got, want)
		}
	})
}
