package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/privileged"
)

// fakeCaller has strings at addresses, descriptors with names, and regular
// files among them.
type fakeCaller struct {
	mem     map[uint64]string
	words   map[uint64]uint64
	fds     map[int32]string
	regular map[int32]bool
}

func (f fakeCaller) str(addr uint64) (string, error) {
	if s, ok := f.mem[addr]; ok {
		return s, nil
	}
	return "", errors.New("unmapped")
}

func (f fakeCaller) u64(addr uint64) (uint64, error) {
	if w, ok := f.words[addr]; ok {
		return w, nil
	}
	return 0, errors.New("unmapped")
}

func (f fakeCaller) fdPath(fd int32) (string, error) {
	if p, ok := f.fds[fd]; ok {
		return p, nil
	}
	return "", errors.New("bad fd")
}

func (f fakeCaller) isRegular(fd int32) bool { return f.regular[fd] }

func TestClassify(t *testing.T) {
	c := fakeCaller{
		mem:     map[uint64]string{1: "etc/ld.so.cache", 2: ".ld.so.cache.tmp", 3: "/abs/x", 4: "", 5: "usr/lib/wsl/drivers/nv"},
		words:   map[uint64]uint64{100: unix.O_PATH | unix.O_DIRECTORY, 101: unix.O_CREAT | unix.O_WRONLY},
		fds:     map[int32]string{unix.AT_FDCWD: "/root", 7: "/root/etc", 8: "/log", 9: "/root/etc/x", 10: "pipe:[1]"},
		regular: map[int32]bool{8: true, 9: true},
	}
	at := func(nr int32, args ...uint64) call {
		d := call{Nr: nr}
		copy(d.Args[:], args)
		return d
	}
	fdcwd := int32(unix.AT_FDCWD)
	cwd := uint64(uint32(fdcwd)) // as the register holds an int
	tests := []struct {
		name string
		data call
		desc string
		step bool
	}{
		{"mkdirat relative to the cwd", at(unix.SYS_MKDIRAT, cwd, 5), "mkdirat /root/usr/lib/wsl/drivers/nv", true},
		{"renameat between dirfds", at(unix.SYS_RENAMEAT, 7, 2, 7, 1), "renameat /root/etc/.ld.so.cache.tmp -> /root/etc/etc/ld.so.cache", true},
		{"linkat of an empty path names the fd", at(unix.SYS_LINKAT, 9, 4, 7, 3, unix.AT_EMPTY_PATH), "linkat /root/etc/x -> /abs/x", true},
		{"openat to read: not a step", at(unix.SYS_OPENAT, 7, 1, unix.O_RDONLY), "openat /root/etc/etc/ld.so.cache", false},
		{"openat O_TMPFILE", at(unix.SYS_OPENAT, 7, 4, unix.O_TMPFILE|unix.O_WRONLY), "openat /root/etc (O_TMPFILE)", true},
		{"openat2 O_PATH lookup: not a step", at(unix.SYS_OPENAT2, 7, 1, 100), "openat2 /root/etc/etc/ld.so.cache", false},
		{"openat2 creating", at(unix.SYS_OPENAT2, 7, 1, 101), "openat2 /root/etc/etc/ld.so.cache (O_CREAT)", true},
		{"write to a file", at(unix.SYS_WRITE, 9, 0, 42), "write /root/etc/x (42 bytes)", true},
		{"write to the skipped log", at(unix.SYS_WRITE, 8, 0, 42), "write /log", false},
		{"write to a pipe", at(unix.SYS_WRITE, 10, 0, 1), "write pipe:[1]", false},
		{"symlinkat shows the link text", at(unix.SYS_SYMLINKAT, 3, 7, 2), `symlinkat "/abs/x" -> /root/etc/.ld.so.cache.tmp`, true},
		{"mount with no source", at(unix.SYS_MOUNT, 0, 3), "mount (none) -> /abs/x", true},
		{"unreadable path counts", at(unix.SYS_UNLINKAT, 7, 99), "unlinkat (unreadable)", true},
		{"a call that is never a step", at(unix.SYS_READ, 7), "syscall 0", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			desc, step := classify(c, tt.data, []string{"/log"})
			if desc != tt.desc || step != tt.step {
				t.Errorf("classify = %q, %v; want %q, %v", desc, step, tt.desc, tt.step)
			}
		})
	}
}

// TestKillAtEachStep: stepkill kills a shell at each of its steps in turn;
// what the shell did before that step is there, the step and what follows
// are not, and --at 0 lists every step.
func TestKillAtEachStep(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "stepkill")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	script := `mkdir a && echo hi > f && mv f g && ln -s x l`
	want := []string{"mkdir DIR/a", "openat DIR/f (O_CREAT|O_TRUNC)", "write DIR/f (3 bytes)", "renameat2 DIR/f -> DIR/g", `symlinkat "x" -> DIR/l`}
	for at := 0; at <= len(want); at++ {
		dir := t.TempDir()
		rep := filepath.Join(t.TempDir(), "report")
		cmd := exec.Command(bin, "--at", strconv.Itoa(at), "--report", rep, "--", "sh", "-c", script)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		data, rerr := os.ReadFile(rep)
		if rerr != nil {
			t.Fatalf("--at %d: no report: %v (%v: %s)", at, rerr, err, out)
		}
		lines := strings.Split(strings.TrimSpace(strings.ReplaceAll(string(data), dir, "DIR")), "\n")
		n := at
		if at == 0 {
			n = len(want)
		}
		for i := 0; i < n; i++ {
			if w := "step " + strconv.Itoa(i+1) + ": " + want[i]; i >= len(lines) || lines[i] != w {
				t.Fatalf("--at %d: report\n%s\nwant line %d %q", at, data, i+1, w)
			}
		}
		var ents []string
		des, _ := os.ReadDir(dir)
		for _, e := range des {
			ents = append(ents, e.Name())
		}
		got := strings.Join(ents, " ")
		if at == 0 {
			if err != nil || lines[len(lines)-1] != "exit 0 after 5 steps" || got != "a g l" {
				t.Errorf("--at 0: %v, report %q, dir %q", err, lines[len(lines)-1], got)
			}
			continue
		}
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != exitKilled || lines[len(lines)-1] != "killed at step "+strconv.Itoa(at) {
			t.Errorf("--at %d: %v, report %q; want exit %d", at, err, lines[len(lines)-1], exitKilled)
		}
		// What the steps before the killed one left.
		if wantDir := []string{"", "a", "a f", "a f", "a g"}[at-1]; got != wantDir {
			t.Errorf("--at %d: dir holds %q, want %q", at, got, wantDir)
		}
	}
}

// TestOtherPidNamespace: stepkill in a pid namespace of its own, as a
// createContainer hook is, whose /proc is the host's: it still reads the
// command's paths, through the /proc entry that names it there.
func TestOtherPidNamespace(t *testing.T) {
	privileged.Require(t, "makes a pid namespace")
	bin := filepath.Join(t.TempDir(), "stepkill")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	dir := t.TempDir()
	rep := filepath.Join(t.TempDir(), "report")
	cmd := exec.Command("unshare", "--pid", "--fork", "--", bin, "--report", rep, "--", "sh", "-c", "mkdir a && echo x >b")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	data, err := os.ReadFile(rep)
	if err != nil {
		t.Fatal(err)
	}
	want := "step 1: mkdir DIR/a\nstep 2: openat DIR/b (O_CREAT|O_TRUNC)\nstep 3: write DIR/b (2 bytes)\nexit 0 after 3 steps\n"
	if got := strings.ReplaceAll(string(data), dir, "DIR"); got != want {
		t.Errorf("report:\n%s\nwant:\n%s", got, want)
	}
}
