package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/dxgsim/internal/dxg"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/dxgsim/internal/seccomp"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/dxgsim/internal/supervise"
)

// run is dxgsim's parent side: it returns the exit status.
func run(args []string, stderr io.Writer) int {
	o, err := parseArgs(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		return fail(stderr, err)
	}
	if os.Geteuid() != 0 {
		return fail(stderr, errors.New("must run as root: it creates device nodes, installs seccomp listeners and reads other processes' memory"))
	}
	k, err := dxg.New(o.cfg)
	if err != nil {
		return fail(stderr, err)
	}
	mode := uint32(0o666) // WSL's
	if o.denied {
		mode = 0o600
	}
	if o.dev != "" {
		if err := createNode(o.dev, mode); err != nil {
			return fail(stderr, err)
		}
		defer removeNode(o.dev)
	}

	cmd, sock, err := startShim(o, mode)
	if err != nil {
		return fail(stderr, err)
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	go func() {
		for s := range sigs {
			_ = cmd.Process.Signal(s)
		}
	}()

	fd, err := receiveFD(sock)
	if err != nil {
		sock.Close()
		// The shim said why on stderr (or was killed); its status says
		// the rest.
		return waitStatus(cmd.Wait())
	}
	sup, err := supervise.New(seccomp.NewListener(fd), k, nodeRdev, stderr)
	if err != nil {
		sock.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return fail(stderr, err)
	}
	sup.Start()
	if _, err := sock.Write([]byte{1}); err != nil {
		_ = cmd.Process.Kill() // the shim died meanwhile; Wait says how
	}
	sock.Close()
	status := waitStatus(cmd.Wait())
	sup.Stop()

	rep := newReport(o, status, k, sup)
	for _, m := range rep.Misuse {
		fmt.Fprintf(stderr, "dxgsim: misuse: %s\n", m)
	}
	if more := rep.MisuseTotal - len(rep.Misuse); more > 0 {
		fmt.Fprintf(stderr, "dxgsim: misuse: %d more not shown\n", more)
	}
	if o.report != "" {
		if err := rep.write(o.report); err != nil {
			fmt.Fprintf(stderr, "dxgsim: %v\n", err)
			if status == 0 {
				status = exitSetup
			}
		}
	}
	if rep.MisuseTotal > 0 && status == 0 {
		status = exitMisuse
	}
	return status
}

// startShim starts dxgsim again as the shim, with stdio inherited, and
// returns it with dxgsim's end of their socketpair.
func startShim(o options, mode uint32) (*exec.Cmd, *os.File, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, nil, fmt.Errorf("find dxgsim's own binary: %w", err)
	}
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("socketpair: %w", err)
	}
	parent, child := os.NewFile(uintptr(pair[0]), "dxgsim"), os.NewFile(uintptr(pair[1]), "dxgsim-shim")
	defer child.Close()
	cmd := exec.Command(self, shimArgs(o, mode)...)
	cmd.Args[0] = "dxgsim"
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.ExtraFiles = []*os.File{child} // fd 3 == shimSock
	if o.bindHost != "" {
		// Go's child makes / MS_REC|MS_PRIVATE right after unsharing.
		cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	}
	if err := cmd.Start(); err != nil {
		parent.Close()
		return nil, nil, fmt.Errorf("start the shim: %w", err)
	}
	return cmd, parent, nil
}

// receiveFD reads the listener fd the shim sends.
func receiveFD(sock *os.File) (int, error) {
	buf := make([]byte, 1)
	oob := make([]byte, unix.CmsgSpace(4))
	var n, oobn int
	var err error
	for {
		n, oobn, _, _, err = unix.Recvmsg(int(sock.Fd()), buf, oob, unix.MSG_CMSG_CLOEXEC)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return -1, fmt.Errorf("receive the seccomp listener: %w", err)
	}
	if n == 0 {
		return -1, errors.New("the shim exited before installing the filter")
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return -1, fmt.Errorf("no listener fd in the shim's message: %v", err)
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		return -1, fmt.Errorf("no listener fd in the shim's message: %v", err)
	}
	return fds[0], nil
}

// waitStatus turns cmd.Wait's result into a shell-style exit status.
func waitStatus(err error) int {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		if err != nil {
			return exitSetup
		}
		return 0
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ee.ExitCode()
}
