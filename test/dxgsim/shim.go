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
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/dxgsim/internal/dxg"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/dxgsim/internal/hostview"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/dxgsim/internal/seccomp"
)

// shimArg as argv[1] makes dxgsim the shim: the child that installs the
// filter and then becomes CMD.
const shimArg = "__shim"

// shimSock is the fd of the shim's end of the socketpair (ExtraFiles[0]).
const shimSock = 3

// nobody is the uid and gid CMD runs as under the denied fault.
const nobody = 65534

// shimArgs is how the parent tells the shim what to do.
func shimArgs(o options, mode uint32) []string {
	a := []string{shimArg, "--mode", strconv.FormatUint(uint64(mode), 8)}
	if o.bindHost != "" {
		a = append(a, "--bind-host", o.bindHost)
	}
	if o.denied {
		a = append(a, "--nobody")
	}
	return append(append(a, "--"), o.cmd...)
}

// shim runs in the child, which the parent started in a new mount
// namespace when --bind-host is set. It lays out the simulated host,
// installs the filter, hands the listener to the parent, waits for the
// go-ahead and execs CMD, which keeps the filter, as do all its
// descendants.
func shim(args []string, stderr io.Writer) int {
	// One thread from here to exec: the filter is installed with TSYNC
	// anyway, but the privilege drop and exec are clearer on one thread.
	runtime.LockOSThread()
	unix.CloseOnExec(shimSock)

	fs := flag.NewFlagSet("dxgsim shim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	mode := fs.String("mode", "666", "node permission bits, octal")
	bindHost := fs.String("bind-host", "", "simulated host tree")
	asNobody := fs.Bool("nobody", false, "run CMD as 65534:65534")
	if err := fs.Parse(args); err != nil || fs.NArg() == 0 {
		fmt.Fprintln(stderr, "dxgsim: the shim is started by dxgsim itself, not by hand")
		return exitSetup
	}
	perm, err := strconv.ParseUint(*mode, 8, 32)
	if err != nil {
		return fail(stderr, fmt.Errorf("shim: bad --mode %q", *mode))
	}
	cmd := fs.Args()

	if *bindHost != "" {
		if err := hostview.Setup(*bindHost, uint32(perm), nodeRdev); err != nil {
			return fail(stderr, fmt.Errorf("--bind-host: %w", err))
		}
	}
	// Resolved as root, before the filter: a missing command is reported
	// without starting the supervisor's work.
	path, err := exec.LookPath(cmd[0])
	if err != nil {
		fmt.Fprintf(stderr, "dxgsim: %v\n", err)
		return exitNotFound
	}

	fd, err := seccomp.Install(seccomp.Filter(dxg.Requests()))
	if err != nil {
		return fail(stderr, fmt.Errorf("%w: dxgsim needs root (CAP_SYS_ADMIN) and a kernel with seccomp user notification (5.5+)", err))
	}
	if err := unix.Sendmsg(shimSock, []byte{0}, unix.UnixRights(fd), nil, 0); err != nil {
		return fail(stderr, fmt.Errorf("shim: hand the listener to dxgsim: %w", err))
	}
	unix.Close(fd)
	var go1 [1]byte
	if n, _ := unix.Read(shimSock, go1[:]); n != 1 {
		return fail(stderr, errors.New("shim: dxgsim went away before starting the command"))
	}
	unix.Close(shimSock)

	if *asNobody {
		// syscall's set*id calls apply to every thread of the process.
		if err := syscall.Setgroups(nil); err != nil {
			return fail(stderr, fmt.Errorf("shim: setgroups: %w", err))
		}
		if err := syscall.Setresgid(nobody, nobody, nobody); err != nil {
			return fail(stderr, fmt.Errorf("shim: setgid %d: %w", nobody, err))
		}
		if err := syscall.Setresuid(nobody, nobody, nobody); err != nil {
			return fail(stderr, fmt.Errorf("shim: setuid %d: %w", nobody, err))
		}
	}
	err = syscall.Exec(path, cmd, os.Environ())
	fmt.Fprintf(stderr, "dxgsim: exec %s: %v\n", path, err)
	return exitNoExec
}
