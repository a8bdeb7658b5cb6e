package doctor

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/hooklog"
)

// logTail is how much of the log's end is read for recent errors.
const logTail = 256 << 10

// recent is how old an error may be to count.
const recent = 24 * time.Hour

func checkLog(o Options, r *Report) {
	if o.LogFile == "" {
		r.add("log", OK, "", "the hook's log is disabled (log_file = \"\"): failures show only in the engine's error")
		return
	}
	p := o.LogFile
	fi, err := os.Lstat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		dir := filepath.Dir(p)
		if !isDir(dir) {
			r.add("log", Fail, "sudo mkdir -p "+shellArg(dir), "%s does not exist and its directory %s cannot take it: the hook cannot log", p, dir)
			return
		}
		r.add("log", OK, "", "%s does not exist yet: the hook creates it on its first run", p)
		return
	case err != nil:
		r.add("log", Fail, "", "stat %s: %v", p, err)
		return
	case fi.Mode()&fs.ModeSymlink != 0:
		r.add("log", Fail, "sudo rm "+shellArg(p), "%s is a symlink: the hook does not write its log through a link (it runs as root)", p)
		return
	case !fi.Mode().IsRegular():
		r.add("log", Fail, "", "%s is not a regular file: point log_file in the config at a file", p)
		return
	}
	// The hook runs as root; as another user only the mode bits can tell.
	if *o.Euid == 0 {
		// Opened as the hook opens it, refused for what the hook refuses.
		f, err := hooklog.OpenFile(p)
		if err != nil {
			r.add("log", Fail, "", "%v: the hook cannot log", err)
			return
		}
		f.Close()
	} else if fi.Mode().Perm()&0o022 != 0 {
		r.add("log", Fail, "sudo chmod go-w "+shellArg(p), "%s is writable by group or others (mode %04o): the hook does not write it", p, fi.Mode().Perm())
		return
	} else if fi.Mode().Perm()&0o200 == 0 {
		r.add("log", Fail, "sudo chmod u+w "+shellArg(p), "%s is not writable by its owner: the hook cannot log", p)
		return
	}
	n, last := recentErrors(p, o.Now())
	if n > 0 {
		r.add("log", Warn, "", "%s: %d error line%s in the last 24 hours, latest: %s", p, n, plural2(n), last)
		return
	}
	r.add("log", OK, "", "%s is writable; no errors in the last 24 hours", p)
}

// recentErrors counts the error lines in the log's last logTail bytes whose
// time is within recent of now, and returns the latest. The hook logs with
// logrus's text format: time="2026-11-23T03:00:00Z" level=error msg="...".
func recentErrors(p string, now time.Time) (int, string) {
	f, err := os.Open(p)
	if err != nil {
		return 0, ""
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > logTail {
		if _, err := f.Seek(fi.Size()-logTail, io.SeekStart); err != nil {
			return 0, ""
		}
	}
	data, err := io.ReadAll(io.LimitReader(f, logTail))
	if err != nil {
		return 0, ""
	}
	n, last := 0, ""
	for _, line := range strings.Split(string(data), "\n") {
		t, level, ok := logEntry(line)
		if !ok || level != "error" && level != "fatal" || now.Sub(t) > recent {
			continue
		}
		n++
		last = line
	}
	return n, last
}

// logEntry reads the time and the level an entry begins with:
// time="..." level=L msg=.... Only the start of the line counts: a quoted
// value later in it (a bundle path, a message) may hold "level=error".
func logEntry(line string) (time.Time, string, bool) {
	rest, ok := strings.CutPrefix(line, `time="`)
	if !ok {
		return time.Time{}, "", false
	}
	v, rest, ok := strings.Cut(rest, `"`)
	if !ok {
		return time.Time{}, "", false
	}
	rest, ok = strings.CutPrefix(rest, " level=")
	if !ok {
		return time.Time{}, "", false
	}
	level, _, _ := strings.Cut(rest, " ")
	t, err := time.Parse(time.RFC3339, v)
	return t, level, err == nil
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

func plural2(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
