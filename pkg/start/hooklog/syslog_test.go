package hooklog

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/fixture"
)

// syslogd listens like /dev/log in a new temporary directory every user
// may enter (fixture.Syslogd).
func syslogd(t *testing.T) (string, func() []string) {
	t.Helper()
	return fixture.Syslogd(t, reachable(t))
}

// TestSyslog: one datagram per entry up to the level, with the daemon
// facility and the entry's severity, the tag, and the fields as the file
// has them, quoted the same way; no time and no newline.
func TestSyslog(t *testing.T) {
	path, received := syslogd(t)
	l, err := OpenSyslog(path, "wsl-gpu-hook", Warn)
	if err != nil {
		t.Fatal(err)
	}
	log := l.With("stage", "cdi-hook")
	log.Debugf("d")
	log.Infof("i")
	log.Warnf("w %d", 1)
	log.Errorf("e\nforged=%s", "x")
	l.Close()
	log.Errorf("after close")
	want := []string{
		`<28>wsl-gpu-hook: level=warning msg="w 1" stage=cdi-hook`,
		`<27>wsl-gpu-hook: level=error msg="e\nforged=x" stage=cdi-hook`,
	}
	if got := received(); !slices.Equal(got, want) {
		t.Errorf("syslog got\n%q\nwant\n%q", got, want)
	}
	if l, err := OpenSyslog(filepath.Join(t.TempDir(), "none"), "wsl-gpu-hook", Warn); err == nil || l.Enabled(Error) {
		t.Errorf("OpenSyslog of no socket = %v: want an error and a logger that discards", err)
	}
}

// TestOpenHook: where a hook's entries go. A hook in a user namespace of
// its own cannot open root's log (it runs as the container's root, a host
// uid of the namespace's): its warnings and errors go to syslog, with no
// line on stderr. A log refused for what it is (a link) is said on stderr
// (the error) and on syslog, where the entries then go.
func TestOpenHook(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("root: the log is root's, opened as another user")
	}
	for _, tt := range []struct {
		name     string
		userNS   bool
		link     bool // the log is a symbolic link
		noSyslog bool
		wantErr  string // "" none
		wantFile bool   // the entries went to the file
		syslog   []string
	}{
		{name: "the file", wantFile: true},
		{name: "user namespace", userNS: true,
			syslog: []string{`<27>wsl-gpu-hook: level=error msg=failed stage=cdi-hook`}},
		{name: "user namespace, no syslog", userNS: true, noSyslog: true},
		{name: "a link", link: true, wantErr: "is a symlink: not writing it; remove it or set log_file",
			syslog: []string{`<28>wsl-gpu-hook: level=warning msg="log {log}: is a symlink: not writing it; remove it or set log_file"`,
				`<27>wsl-gpu-hook: level=error msg=failed stage=cdi-hook`}},
		{name: "a link, in a user namespace", userNS: true, link: true, wantErr: "is a symlink",
			syslog: []string{`<28>wsl-gpu-hook: level=warning msg="log {log}: is a symlink: not writing it; remove it or set log_file"`,
				`<27>wsl-gpu-hook: level=error msg=failed stage=cdi-hook`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sock, received := syslogd(t)
			if tt.noSyslog {
				sock = filepath.Join(t.TempDir(), "none")
			}
			dir := reachable(t)
			p := file(t, filepath.Join(dir, "hook.log"), 0o640)
			if tt.link {
				os.Remove(p)
				symlink(t, filepath.Join(dir, "target"), p)
			}
			o := HookOptions{File: p, Syslog: sock, Tag: "wsl-gpu-hook", Level: Info, UserNS: tt.userNS}
			var l *Logger
			var err error
			if tt.userNS {
				// As the container's root: a uid the log's owner is not,
				// without the capabilities to override it.
				asFsuid(t, 100000, func() { l, err = OpenHook(o) })
			} else {
				l, err = OpenHook(o)
			}
			log := l.With("stage", "cdi-hook")
			log.Infof("ready")
			log.Errorf("failed")
			l.Close()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("OpenHook: %v, want no line for stderr", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("OpenHook: %v, want %q", err, tt.wantErr)
			}
			data, _ := os.ReadFile(p)
			if wrote := len(data) > 0; wrote != tt.wantFile {
				t.Errorf("the log file holds %q; want entries: %v", data, tt.wantFile)
			}
			var want []string
			for _, s := range tt.syslog {
				want = append(want, strings.ReplaceAll(s, "{log}", p))
			}
			if got := received(); !slices.Equal(got, want) {
				t.Errorf("syslog got\n%q\nwant\n%q", got, want)
			}
		})
	}
}

// asFsuid runs fn on a thread whose file system uid is uid: it is refused
// what that user is refused (setfsuid clears the capabilities that would
// override the file modes). The thread is discarded after.
func asFsuid(t *testing.T, uid int, fn func()) {
	t.Helper()
	done := make(chan error)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		unix.Setfsuid(uid)
		if got, _ := unix.SetfsuidRetUid(uid); got != uid {
			done <- errors.New("setfsuid did not take")
			return
		}
		fn()
		done <- nil
	}()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// reachable is a new temporary directory every user may enter, as /var/log
// and /dev are.
func reachable(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	fixture.OpenToAll(t, dir)
	return dir
}
