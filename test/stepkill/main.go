package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Exit statuses of stepkill itself, following env(1) and timeout(1).
const (
	exitKilled   = 128 + int(unix.SIGKILL)
	exitSetup    = 125
	exitNotFound = 127
)

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

func fail(stderr io.Writer, err error) int {
	fmt.Fprintf(stderr, "stepkill: %v\n", err)
	return exitSetup
}

type pathList []string

func (p *pathList) String() string     { return strings.Join(*p, ",") }
func (p *pathList) Set(s string) error { *p = append(*p, s); return nil }

// run is the whole program: it returns the exit status.
func run(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("stepkill", flag.ContinueOnError)
	fs.SetOutput(stderr)
	at := fs.Int("at", 0, "kill CMD at its `N`-th step, before the call runs; 0 never kills")
	report := fs.String("report", "", "write the steps seen and how CMD ended to `FILE`")
	var skip pathList
	fs.Var(&skip, "skip", "writes to the file at `PATH` are not steps (repeatable)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return exitSetup
	}
	if fs.NArg() == 0 || *at < 0 {
		return fail(stderr, errors.New("usage: stepkill --at N [--report FILE] [--skip PATH]... -- CMD ARGS..."))
	}
	path, err := exec.LookPath(fs.Arg(0))
	if err != nil {
		fmt.Fprintf(stderr, "stepkill: %v\n", err)
		return exitNotFound
	}
	// Every ptrace request must come from the thread that became the
	// tracer: the one that starts CMD.
	runtime.LockOSThread()
	cmd := exec.Command(path, fs.Args()[1:]...)
	cmd.Args[0] = fs.Arg(0)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Ptrace: true}
	if err := cmd.Start(); err != nil {
		return fail(stderr, err)
	}
	pid := cmd.Process.Pid
	t := &tracer{pid: pid, at: *at, skip: skip, inCall: map[int]bool{}, tgid: map[int]int{pid: pid}, procs: map[int]procCaller{}}
	code, err := t.run()
	if err != nil {
		_ = cmd.Process.Kill()
		fmt.Fprintf(stderr, "stepkill: trace %s: %v\n", fs.Arg(0), err)
		code = exitSetup
	}

	var rep strings.Builder
	for i, st := range t.steps {
		fmt.Fprintf(&rep, "step %d: %s\n", i+1, st)
	}
	switch {
	case t.killed:
		fmt.Fprintf(&rep, "killed at step %d\n", len(t.steps))
		fmt.Fprintf(stderr, "stepkill: killed %s at step %d: %s\n", fs.Arg(0), len(t.steps), t.steps[len(t.steps)-1])
		code = exitKilled
	default:
		fmt.Fprintf(&rep, "exit %d after %d steps\n", code, len(t.steps))
	}
	if *report != "" {
		if err := os.WriteFile(*report, []byte(rep.String()), 0o644); err != nil {
			return fail(stderr, err)
		}
	}
	return code
}

// tracer follows CMD and its threads (and children) from system call to
// system call, and kills CMD at step at.
type tracer struct {
	pid  int
	at   int
	skip []string

	// inCall holds every traced thread, and says which are inside a
	// system call: its entry and its exit stop alike.
	inCall map[int]bool
	// tgid is each traced thread's process, as the clone events said.
	tgid map[int]int
	// procs are the /proc entries of the traced processes.
	procs  map[int]procCaller
	steps  []string
	killed bool
}

// run traces until CMD has exited and returns its shell-style status.
func (t *tracer) run() (int, error) {
	var ws unix.WaitStatus
	// The first stop is CMD's exec.
	if _, err := unix.Wait4(t.pid, &ws, 0, nil); err != nil {
		return 0, err
	}
	if !ws.Stopped() {
		return status(ws), nil
	}
	opts := unix.PTRACE_O_TRACESYSGOOD | unix.PTRACE_O_TRACECLONE | unix.PTRACE_O_TRACEFORK |
		unix.PTRACE_O_TRACEVFORK | unix.PTRACE_O_EXITKILL
	if err := unix.PtraceSetOptions(t.pid, opts); err != nil {
		return 0, fmt.Errorf("set ptrace options: %w", err)
	}
	if err := unix.PtraceSyscall(t.pid, 0); err != nil {
		return 0, err
	}
	code := 0
	for {
		tid, err := unix.Wait4(-1, &ws, unix.WALL, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if errors.Is(err, unix.ECHILD) {
			return code, nil
		}
		if err != nil {
			return 0, err
		}
		if ws.Exited() || ws.Signaled() {
			delete(t.inCall, tid)
			if tid == t.pid {
				code = status(ws)
			}
			continue
		}
		if !ws.Stopped() {
			continue
		}
		if _, seen := t.inCall[tid]; !seen {
			t.inCall[tid] = false
		}
		sig := ws.StopSignal()
		switch {
		case sig == unix.SIGTRAP|0x80: // a system call stop
			t.inCall[tid] = !t.inCall[tid]
			if t.inCall[tid] && t.entry(tid) {
				// Killed: the thread never leaves this stop.
				continue
			}
			sig = 0
		case sig == unix.SIGTRAP || ws.TrapCause() > 0, sig == unix.SIGSTOP:
			// An event (clone, fork, exec) or a new thread's first stop:
			// nothing to deliver.
			t.event(tid, ws.TrapCause())
			sig = 0
		}
		// Any other signal (the Go runtime's SIGURG) is CMD's to get.
		if err := unix.PtraceSyscall(tid, int(sig)); err != nil && !errors.Is(err, unix.ESRCH) {
			return 0, err
		}
	}
}

// event notes whose thread a new one is: a clone makes one of the same
// process, a fork a process of its own.
func (t *tracer) event(tid, cause int) {
	if cause != unix.PTRACE_EVENT_CLONE && cause != unix.PTRACE_EVENT_FORK && cause != unix.PTRACE_EVENT_VFORK {
		return
	}
	msg, err := unix.PtraceGetEventMsg(tid)
	if err != nil {
		return
	}
	if cause == unix.PTRACE_EVENT_CLONE {
		t.tgid[int(msg)] = t.process(tid)
	} else {
		t.tgid[int(msg)] = int(msg)
	}
}

// process is thread tid's process; CMD's when no event named it.
func (t *tracer) process(tid int) int {
	if p, ok := t.tgid[tid]; ok {
		return p
	}
	return t.pid
}

// caller is the /proc entry of thread tid's process.
func (t *tracer) caller(tid int) procCaller {
	pid := t.process(tid)
	p, ok := t.procs[pid]
	if !ok {
		var err error
		if p, err = procOf(pid); err != nil {
			p = procCaller("/proc/unknown-" + strconv.Itoa(pid))
		}
		t.procs[pid] = p
	}
	return p
}

// entry looks at the call thread tid is entering and reports whether it
// killed CMD there.
func (t *tracer) entry(tid int) bool {
	var regs unix.PtraceRegs
	if err := unix.PtraceGetRegs(tid, &regs); err != nil {
		return false
	}
	c := call{Nr: int32(regs.Orig_rax), Args: [6]uint64{regs.Rdi, regs.Rsi, regs.Rdx, regs.R10, regs.R8, regs.R9}}
	desc, step := classify(t.caller(tid), c, t.skip)
	if !step {
		return false
	}
	t.steps = append(t.steps, desc)
	if len(t.steps) != t.at {
		return false
	}
	// The call has not run; SIGKILL ends each thread's group before any
	// of its threads runs again: CMD and whatever it started.
	for other := range t.inCall {
		_ = unix.Kill(other, unix.SIGKILL)
	}
	t.killed = true
	return true
}

// status is a shell-style exit status.
func status(ws unix.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}
