package doctor

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// process is a running daemon as /proc shows it.
type process struct {
	pid   int
	start time.Time // zero when unknown
	env   map[string]string
	args  []string
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's start time; Linux
// fixes it at 100 on every architecture it exposes to user space.
const clockTicks = 100

// findDaemon returns the oldest process named comm that runs in our root
// (a daemon in a chroot or another container is not the one that reads
// our configuration), or nil.
func findDaemon(o Options, comm string) *process {
	ents, err := os.ReadDir(o.ProcDir)
	if err != nil {
		return nil
	}
	boot := bootTime(o)
	var best *process
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		dir := filepath.Join(o.ProcDir, e.Name())
		c, err := os.ReadFile(filepath.Join(dir, "comm"))
		if err != nil || strings.TrimSpace(string(c)) != comm {
			continue
		}
		if root, err := os.Readlink(filepath.Join(dir, "root")); err == nil && root != "/" {
			continue
		}
		p := &process{pid: pid, env: map[string]string{}}
		if data, err := os.ReadFile(filepath.Join(dir, "environ")); err == nil {
			for _, kv := range bytes.Split(data, []byte{0}) {
				if k, v, ok := strings.Cut(string(kv), "="); ok {
					p.env[k] = v
				}
			}
		}
		if data, err := os.ReadFile(filepath.Join(dir, "cmdline")); err == nil {
			for _, a := range bytes.Split(bytes.TrimRight(data, "\x00"), []byte{0}) {
				p.args = append(p.args, string(a))
			}
		}
		if ticks, ok := startTicks(filepath.Join(dir, "stat")); ok && !boot.IsZero() {
			p.start = boot.Add(time.Duration(ticks) * time.Second / clockTicks)
		}
		if best == nil || (!p.start.IsZero() && p.start.Before(best.start)) {
			best = p
		}
	}
	return best
}

// startTicks reads field 22 (starttime) of /proc/PID/stat. The command
// name (field 2) may hold spaces and parentheses, so fields are counted
// after its last ')'.
func startTicks(path string) (uint64, bool) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(data[i+1:]))
	// f[0] is field 3 (state), so field 22 is f[19].
	if len(f) < 20 {
		return 0, false
	}
	n, err := strconv.ParseUint(f[19], 10, 64)
	return n, err == nil
}

// bootTime reads btime from /proc/stat.
func bootTime(o Options) time.Time {
	data, err := os.ReadFile(filepath.Join(o.ProcDir, "stat"))
	if err != nil {
		return time.Time{}
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			if s, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
				return time.Unix(s, 0)
			}
		}
	}
	return time.Time{}
}

// lookPath finds name in the PATH list under Root, as exec.LookPath would
// for a process with that PATH: the first regular executable file.
func lookPath(o Options, path, name string) string {
	for _, dir := range filepath.SplitList(path) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue
		}
		p := filepath.Join(dir, name)
		fi, err := os.Stat(o.resolved(p))
		if err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p
		}
	}
	return ""
}

// isOurBinary reports whether the system path p (under Root) is the hook:
// the same file as Self, or a link chain ending in a file named
// wsl-gpu-hook.
func isOurBinary(o Options, p string) bool {
	full := o.path(p)
	if o.Self != "" {
		a, err1 := os.Stat(o.resolved(p))
		b, err2 := os.Stat(o.Self)
		if err1 == nil && err2 == nil && os.SameFile(a, b) {
			return true
		}
	}
	// Links are resolved inside Root, one level at a time.
	for range 8 {
		target, err := os.Readlink(full)
		if err != nil {
			break
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(p), target)
		}
		p, full = target, o.path(target)
	}
	return filepath.Base(p) == "wsl-gpu-hook"
}
