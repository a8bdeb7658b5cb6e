// Command dxgsim runs a command tree on a simulated WSL2 GPU host: a seccomp
// filter sends every /dev/dxg ioctl to this supervisor, which answers it as
// the WSL kernel driver and the Windows host would, from a simhost profile.
// Every other system call runs for real, so the program under test is the
// shipped binary, unchanged. It is a test tool; nothing ships it.
//
//	dxgsim --profile NAME [--dev PATH] [--fault F]... [--report FILE] [--bind-host DIR] -- CMD ARGS...
//
// What it emulates: enumeration (ENUMADAPTERS2/3 with their count queries,
// EOVERFLOW/EINVAL rules and compute-only filtering), per-process adapter
// handles (a new one per enumeration, CLOSEADAPTER, OPENADAPTERFROMLUID),
// and QUERYADAPTERINFO for WDDM version, adapter type, PCI ids, adapter
// address, driver versions, description and the driver store path (the
// UTF-16 registry query answered BUFFER_OVERFLOW, then SUCCESS). What it
// does not: any GPU work (no D3DKMT calls beyond these), display, paging,
// sync objects; a real kernel's memory corruption on misuse is reported
// instead of performed.
//
// Faults: old-kernel (ENUMADAPTERS3 unknown), query-fail=N (adapter N's
// queries fail as DEVICE_REMOVED), missing-folder=N (adapter N names a
// driver store folder that is not on disk, as after a driver update),
// zero-adapters, denied (device mode 0600, command runs as nobody),
// ntstatus (host failures come back as raw negative NTSTATUS, as 4.19-era
// drivers returned them).
//
// Protocol misuse the real kernel would punish (an ENUMADAPTERS3 capacity
// below the adapter count, adapter handles never closed) is printed as
// `dxgsim: misuse: ...` lines and makes dxgsim exit 3 when the command
// itself succeeded.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/simhost"
)

const (
	shimArg    = "__dxgsim_shim"
	scratchEnv = "DXGSIM_SCRATCH"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == shimArg {
		shim(os.Args[2:]) // never returns
	}
	code, err := run(os.Args[1:])
	if err != nil {
		fmt.Fprintf(os.Stderr, "dxgsim: %v\n", err)
		os.Exit(2)
	}
	os.Exit(code)
}

type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }

func parseFaults(list []string, p simhost.Profile) (faults, error) {
	f := faults{queryFail: -1, missingFolder: -1}
	for _, s := range list {
		name, val, hasVal := strings.Cut(s, "=")
		index := func() (int, error) {
			n, err := strconv.Atoi(val)
			if !hasVal || err != nil || n < 0 || n >= len(p.Adapters) {
				return 0, fmt.Errorf("fault %s needs an adapter index 0..%d of profile %s", name, len(p.Adapters)-1, p.Name)
			}
			return n, nil
		}
		var err error
		switch name {
		case "old-kernel":
			f.oldKernel = true
		case "zero-adapters":
			f.zeroAdapters = true
		case "denied":
			f.denied = true
		case "ntstatus":
			f.ntstatus = true
		case "query-fail":
			f.queryFail, err = index()
		case "missing-folder":
			f.missingFolder, err = index()
		default:
			err = fmt.Errorf("unknown fault %q (known: old-kernel, query-fail=N, missing-folder=N, zero-adapters, denied, ntstatus)", s)
		}
		if err != nil {
			return f, err
		}
	}
	return f, nil
}

func run(args []string) (int, error) {
	fs := flag.NewFlagSet("dxgsim", flag.ContinueOnError)
	profileName := fs.String("profile", "", "simulated host: "+strings.Join(simhost.Names(), ", "))
	dev := fs.String("dev", "", "where to create the simulated device node")
	report := fs.String("report", "", "write a JSON summary here")
	bindHost := fs.String("bind-host", "", "fixture tree to show at /usr/lib/wsl (and the node at /dev/dxg) in a private mount namespace")
	var faultList multi
	fs.Var(&faultList, "fault", "inject a fault (repeatable)")
	if err := fs.Parse(args); err != nil {
		return 0, err
	}
	cmd := fs.Args()
	if len(cmd) == 0 {
		return 0, errors.New("no command given: dxgsim --profile NAME --dev PATH -- CMD ARGS...")
	}
	p, err := simhost.Lookup(*profileName)
	if err != nil {
		return 0, err
	}
	f, err := parseFaults(faultList, p)
	if err != nil {
		return 0, err
	}
	if *dev == "" && *bindHost == "" {
		return 0, errors.New("--dev is required (or --bind-host, which puts the node at /dev/dxg)")
	}
	if *bindHost != "" {
		if *bindHost, err = filepath.Abs(*bindHost); err != nil {
			return 0, err
		}
	}

	mode := uint32(0o666)
	if f.denied {
		mode = 0o600
	}
	if *dev != "" {
		if err := makeNode(*dev, mode); err != nil {
			return 0, err
		}
		defer os.Remove(*dev)
	}

	k := newKernel(p, f)
	code, err := start(cmd, k, f, *bindHost, mode)
	if err != nil {
		return 0, err
	}
	k.leaks()
	s := k.summary(p.Name)
	for _, m := range s.Misuse {
		fmt.Fprintf(os.Stderr, "dxgsim: misuse: %s\n", m)
	}
	if *report != "" {
		data, _ := json.MarshalIndent(s, "", "  ")
		if err := os.WriteFile(*report, append(data, '\n'), 0o644); err != nil {
			return 0, err
		}
	}
	if len(s.Misuse) > 0 && code == 0 {
		code = 3
	}
	return code, nil
}

// makeNode creates the simulated device; it refuses to replace anything
// that is not already such a node.
func makeNode(path string, mode uint32) error {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err == nil {
		if st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != dxgDev {
			return fmt.Errorf("%s exists and is not a simulated dxg node: refusing to replace it", path)
		}
		os.Remove(path)
	}
	old := unix.Umask(0)
	defer unix.Umask(old)
	if err := unix.Mknod(path, unix.S_IFCHR|mode, int(dxgDev)); err != nil {
		return fmt.Errorf("mknod %s: %w", path, err)
	}
	return nil
}

// start runs cmd through the shim, supervises it and returns its exit code.
func start(cmd []string, k *kernel, f faults, bindHost string, mode uint32) (int, error) {
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	parent, child := os.NewFile(uintptr(pair[0]), "dxgsim-parent"), os.NewFile(uintptr(pair[1]), "dxgsim-child")
	defer parent.Close()
	self, err := os.Executable()
	if err != nil {
		return 0, err
	}
	shimArgs := []string{shimArg, bindHost, strconv.FormatUint(uint64(mode), 8), strconv.FormatBool(f.denied), "--"}
	c := exec.Command(self, append(shimArgs, cmd...)...)
	c.Stdin, c.Stdout, c.Stderr = os.Stdin, os.Stdout, os.Stderr
	if bindHost != "" {
		scratch, err := os.MkdirTemp("", "dxgsim-ns-")
		if err != nil {
			return 0, err
		}
		defer os.Remove(scratch)
		c.Env = append(os.Environ(), scratchEnv+"="+scratch)
	}
	c.ExtraFiles = []*os.File{child}
	if err := c.Start(); err != nil {
		child.Close()
		return 0, err
	}
	child.Close()

	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		for s := range sigs {
			c.Process.Signal(s)
		}
	}()

	listener, err := recvFD(int(parent.Fd()))
	if err != nil {
		c.Process.Kill()
		c.Wait()
		return 0, fmt.Errorf("shim did not install the filter: %w", err)
	}
	go supervise(listener, k)
	if _, err := parent.Write([]byte{1}); err != nil {
		c.Process.Kill()
	}
	err = c.Wait()
	signal.Stop(sigs)
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal()), nil
		}
		return ee.ExitCode(), nil
	}
	return 0, err
}

// shim runs in the child: it sets up the namespace (--bind-host), installs
// the filter on this thread, hands the listener to the parent, waits for
// the go-ahead and execs the command from the same thread, so the command
// and all its descendants carry the filter.
func shim(args []string) {
	die := func(format string, a ...any) {
		fmt.Fprintf(os.Stderr, "dxgsim: "+format+"\n", a...)
		os.Exit(2)
	}
	if len(args) < 5 || args[3] != "--" {
		die("bad shim arguments")
	}
	bindHost, denied, cmd := args[0], args[2] == "true", args[4:]
	scratch := os.Getenv(scratchEnv)
	os.Unsetenv(scratchEnv)
	mode, _ := strconv.ParseUint(args[1], 8, 32)
	runtime.LockOSThread()
	sock := 3
	if bindHost != "" {
		if err := bindSimHost(bindHost, scratch, uint32(mode)); err != nil {
			die("bind the simulated host: %v", err)
		}
	}
	path, err := exec.LookPath(cmd[0])
	if err != nil {
		die("%v", err)
	}
	if denied {
		// Drop to nobody before the filter: the command then meets the
		// device's 0600 mode as an unprivileged user would.
		if err := unix.Setgroups(nil); err != nil {
			die("setgroups: %v", err)
		}
		if err := unix.Setgid(65534); err != nil {
			die("setgid: %v", err)
		}
		if err := unix.Setuid(65534); err != nil {
			die("setuid: %v", err)
		}
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			die("no_new_privs: %v", err)
		}
	}
	listener, err := installFilter()
	if err != nil {
		die("%v", err)
	}
	if err := sendFD(sock, listener); err != nil {
		die("send listener: %v", err)
	}
	unix.Close(listener)
	buf := make([]byte, 1)
	if n, err := unix.Read(sock, buf); n != 1 || err != nil {
		die("supervisor went away: %v", err)
	}
	unix.Close(sock)
	err = unix.Exec(path, cmd, os.Environ())
	die("exec %s: %v", path, err)
}

// bindSimHost gives this thread (and the command it execs) a private mount
// namespace where the fixture appears at /usr/lib/wsl and the node at
// /dev/dxg, without creating anything on the host: overlays on /usr/lib and
// /dev provide the mount points, with their upper layers on a tmpfs.
func bindSimHost(fixture, scratch string, mode uint32) error {
	if err := unix.Unshare(unix.CLONE_NEWNS | unix.CLONE_FS); err != nil {
		return fmt.Errorf("unshare: %w", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make / private: %w", err)
	}
	// scratch is an empty directory the parent made and removes; the
	// tmpfs on it exists only in this namespace.
	if err := unix.Mount("tmpfs", scratch, "tmpfs", 0, "mode=0700"); err != nil {
		return fmt.Errorf("tmpfs: %w", err)
	}
	for _, d := range []string{"usr/upper", "usr/work", "dev/upper", "dev/work", "olddev"} {
		if err := os.MkdirAll(filepath.Join(scratch, d), 0o755); err != nil {
			return err
		}
	}
	overlay := func(target, name string) error {
		opts := fmt.Sprintf("lowerdir=%s,upperdir=%s/%s/upper,workdir=%s/%s/work", target, scratch, name, scratch, name)
		if err := unix.Mount("overlay", target, "overlay", 0, opts); err != nil {
			return fmt.Errorf("overlay on %s: %w", target, err)
		}
		return nil
	}
	// /dev's submounts vanish under an overlay: keep them and put them back.
	if err := unix.Mount("/dev", filepath.Join(scratch, "olddev"), "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("keep /dev: %w", err)
	}
	subs, err := submounts("/dev")
	if err != nil {
		return err
	}
	if err := overlay("/usr/lib", "usr"); err != nil {
		return err
	}
	if err := overlay("/dev", "dev"); err != nil {
		return err
	}
	for _, s := range subs {
		src := filepath.Join(scratch, "olddev", strings.TrimPrefix(s, "/dev/"))
		if err := unix.Mount(src, s, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("restore %s: %w", s, err)
		}
	}
	if err := os.MkdirAll("/usr/lib/wsl", 0o755); err != nil {
		return err
	}
	if err := unix.Mount(filepath.Join(fixture, "usr/lib/wsl"), "/usr/lib/wsl", "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind fixture: %w", err)
	}
	if err := unix.Mount("", "/usr/lib/wsl", "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
		return fmt.Errorf("make /usr/lib/wsl read-only: %w", err)
	}
	if err := makeNode("/dev/dxg", mode); err != nil {
		return err
	}
	return nil
}

// submounts lists the mount points directly below dir, shallowest first.
func submounts(dir string) ([]string, error) {
	data, err := os.ReadFile("/proc/thread-self/mountinfo")
	if err != nil {
		return nil, err
	}
	var out []string
	seen := map[string]bool{}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		mp := f[4]
		if strings.HasPrefix(mp, dir+"/") && !seen[mp] {
			seen[mp] = true
			out = append(out, mp)
		}
	}
	return out, nil
}
