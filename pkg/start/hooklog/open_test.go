package hooklog

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestOpenRefuses: the hook runs as root and its log's directory may be
// writable by others (Ubuntu's /var/log is group syslog's): a log that is
// a symbolic link, a hard link, not a regular file, not root's or
// writable by group or others, or in a directory everyone may write
// without the sticky bit, is not written. Open says why and what to do in
// one line, and the file a link points at is unchanged after an entry.
func TestOpenRefuses(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("root: the cases chown files to another user")
	}
	const elsewhere = "someone else's file\n"
	for _, tt := range []struct {
		name string
		// make builds the case in dir and returns the log path; the file
		// at dir/target must be unchanged after.
		make func(t *testing.T, dir string) string
		want string // the error, {log} the log path, {dir} its directory
	}{
		{"symbolic link", func(t *testing.T, dir string) string {
			return symlink(t, filepath.Join(dir, "target"), filepath.Join(dir, "log", "hook.log"))
		}, "log {log}: is a symlink: not writing it; remove it or set log_file"},
		{"symbolic link to nothing", func(t *testing.T, dir string) string {
			return symlink(t, filepath.Join(dir, "none"), filepath.Join(dir, "log", "hook.log"))
		}, "log {log}: is a symlink: not writing it; remove it or set log_file"},
		{"hard link", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "log", "hook.log")
			mkdir(t, filepath.Dir(p), 0o755)
			if err := os.Link(filepath.Join(dir, "target"), p); err != nil {
				t.Fatal(err)
			}
			return p
		}, "log {log}: has 2 links: not writing it; remove it or set log_file"},
		{"owned by another user", func(t *testing.T, dir string) string {
			p := file(t, filepath.Join(dir, "log", "hook.log"), 0o640)
			chown(t, p, 65534)
			return p
		}, "log {log}: is owned by uid 65534, not root: not writing it; remove it or set log_file"},
		{"group-writable", func(t *testing.T, dir string) string {
			return file(t, filepath.Join(dir, "log", "hook.log"), 0o660)
		}, "log {log}: is writable by group or others (mode 0660): not writing it; chmod go-w {log} or set log_file"},
		{"writable by others", func(t *testing.T, dir string) string {
			return file(t, filepath.Join(dir, "log", "hook.log"), 0o646)
		}, "log {log}: is writable by group or others (mode 0646): not writing it; chmod go-w {log} or set log_file"},
		{"fifo", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "log", "hook.log")
			mkdir(t, filepath.Dir(p), 0o755)
			if err := unix.Mkfifo(p, 0o600); err != nil {
				t.Fatal(err)
			}
			// A reader: a fifo without one would be refused by open
			// (ENXIO), and Open must not block either way.
			r, err := os.OpenFile(p, os.O_RDONLY|unix.O_NONBLOCK, 0)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { r.Close() })
			return p
		}, "log {log}: is not a regular file: not writing it; remove it or set log_file"},
		{"directory", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "log", "hook.log")
			mkdir(t, p, 0o755)
			return p
		}, "log {log}: is not a regular file: not writing it; remove it or set log_file"},
		{"directory everyone may write, not sticky", func(t *testing.T, dir string) string {
			d := filepath.Join(dir, "log")
			mkdir(t, d, 0o777)
			return filepath.Join(d, "hook.log")
		}, "log {log}: its directory {dir} is writable by everyone and not sticky: not writing it; chmod o-w {dir} (or +t) or set log_file"},
		{"no directory", func(t *testing.T, dir string) string {
			return filepath.Join(dir, "log", "hook.log")
		}, "log {log}: open: no such file or directory: not writing it; mkdir -p {dir} or set log_file"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			target := file(t, filepath.Join(dir, "target"), 0o644)
			if err := os.WriteFile(target, []byte(elsewhere), 0o644); err != nil {
				t.Fatal(err)
			}
			p := tt.make(t, dir)
			l, err := Open(p, Debug)
			l.Errorf("planted %s", "entry")
			l.Close()
			want := strings.NewReplacer("{log}", p, "{dir}", filepath.Dir(p)).Replace(tt.want)
			var refused *RefusedError
			if err == nil || err.Error() != want || !errors.As(err, &refused) {
				t.Errorf("Open error:\n%v\nwant\n%s", err, want)
			}
			if l.Enabled(Error) {
				t.Errorf("Open returned a logger that writes")
			}
			if data, _ := os.ReadFile(target); string(data) != elsewhere {
				t.Errorf("%s was written: %q", target, data)
			}
		})
	}
}

// TestOpenAccepts: what the hook makes itself, and directories whose
// writers cannot swap a root-owned log: a group-writable one (Ubuntu's
// /var/log, root:syslog 0775) and one everyone may write with the sticky
// bit (/tmp).
func TestOpenAccepts(t *testing.T) {
	for _, tt := range []struct {
		name    string
		dirMode os.FileMode
		exists  bool
	}{
		{"created", 0o755, false},
		{"existing, 0640", 0o755, true},
		{"group-writable directory", 0o775, false},
		{"sticky directory everyone may write", 0o777 | os.ModeSticky, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := filepath.Join(t.TempDir(), "log")
			mkdir(t, d, tt.dirMode)
			p := filepath.Join(d, "hook.log")
			if tt.exists {
				file(t, p, 0o640)
			}
			l, err := Open(p, Info)
			if err != nil {
				t.Fatal(err)
			}
			l.Infof("entry")
			l.Close()
			fi, err := os.Lstat(p)
			if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o640 || fi.Size() == 0 {
				t.Errorf("log after Open: %v, %v; want a regular file, mode 0640, with the entry", fi, err)
			}
		})
	}
}

// TestOpenFileMessages: OpenFile's refusals name no configuration key (the
// wrapper's log is the engine's --log), and keep the cause for errors.Is.
func TestOpenFileMessages(t *testing.T) {
	dir := t.TempDir()
	p := symlink(t, filepath.Join(dir, "target"), filepath.Join(dir, "log.json"))
	_, err := OpenFile(p)
	if want := "log " + p + ": is a symlink: not writing it; remove it"; err == nil || err.Error() != want {
		t.Errorf("OpenFile error %v, want %s", err, want)
	}
	_, err = OpenFile(filepath.Join(dir, "none", "log.json"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("OpenFile error %v: want one errors.Is(fs.ErrNotExist) reports", err)
	}
	if !strings.HasPrefix(fmt.Sprint(err), "log ") {
		t.Errorf("OpenFile error %v does not start with the log's path", err)
	}
}

func symlink(t *testing.T, target, p string) string {
	t.Helper()
	mkdir(t, filepath.Dir(p), 0o755)
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
	}
	return p
}

func file(t *testing.T, p string, mode os.FileMode) string {
	t.Helper()
	mkdir(t, filepath.Dir(p), 0o755)
	if err := os.WriteFile(p, nil, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil { // past the umask
		t.Fatal(err)
	}
	return p
}

func mkdir(t *testing.T, d string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(d, mode); err != nil {
		t.Fatal(err)
	}
}

func chown(t *testing.T, p string, uid int) {
	t.Helper()
	if err := os.Chown(p, uid, -1); err != nil {
		t.Fatal(err)
	}
}
