package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

func init() {
	// Mount namespace and root are per thread until exec: keep main on
	// the thread that unshares.
	runtime.LockOSThread()
}

type bindList []string

func (b *bindList) String() string     { return strings.Join(*b, ",") }
func (b *bindList) Set(v string) error { *b = append(*b, v); return nil }

func main() {
	var root, scratch string
	var binds bindList
	var o options
	fs := flag.NewFlagSet("pivotroot", flag.ContinueOnError)
	fs.StringVar(&root, "root", "", "root file system `DIR` (read, never written); DIR:DIR... stacks them, the first on top")
	fs.StringVar(&scratch, "scratch", "", "`DIR` for the overlay's upper layer")
	fs.Var(&binds, "bind", "host `PATH` shown at the same path inside, or SRC:DST (repeatable)")
	fs.BoolVar(&o.cgroup2, "cgroup2", false, "mount cgroup2 alone at /sys/fs/cgroup")
	fs.BoolVar(&o.tmpfsUpper, "tmpfs-upper", false, "keep the overlay's upper layer in a tmpfs: what the command writes to its root is gone when it exits")
	fs.BoolVar(&o.privateTmp, "private-tmp", false, "a tmpfs on /tmp instead of the host's /tmp")
	fs.BoolVar(&o.readOnly, "read-only", false, "make the root itself read-only (the mounts on it stay as they are)")
	if err := fs.Parse(os.Args[1:]); err != nil || fs.NArg() == 0 || root == "" || scratch == "" {
		fmt.Fprintln(os.Stderr, "usage: pivotroot --root DIR[:DIR]... --scratch DIR [--bind PATH|SRC:DST]... [--cgroup2] [--tmpfs-upper] [--private-tmp] [--read-only] -- CMD ARGS...")
		os.Exit(125)
	}
	if err := enter(root, scratch, binds, o); err != nil {
		fmt.Fprintf(os.Stderr, "pivotroot: %v\n", err)
		os.Exit(125)
	}
	path, err := exec.LookPath(fs.Arg(0))
	if err != nil {
		fmt.Fprintf(os.Stderr, "pivotroot: %v\n", err)
		os.Exit(127)
	}
	err = syscall.Exec(path, fs.Args(), os.Environ())
	fmt.Fprintf(os.Stderr, "pivotroot: exec %s: %v\n", path, err)
	os.Exit(126)
}

// options are the flags beyond the root, the scratch dir and the binds.
type options struct {
	cgroup2, tmpfsUpper, privateTmp, readOnly bool
}

func enter(root, scratch string, binds []string, o options) error {
	if err := unix.Unshare(unix.CLONE_NEWNS | unix.CLONE_FS); err != nil {
		return fmt.Errorf("unshare: %w", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make / private: %w", err)
	}
	if o.tmpfsUpper {
		// In this namespace only: the upper layer dies with it.
		if err := os.MkdirAll(scratch, 0o755); err != nil {
			return err
		}
		if err := unix.Mount("tmpfs", scratch, "tmpfs", 0, "mode=0755"); err != nil {
			return fmt.Errorf("tmpfs on %s: %w", scratch, err)
		}
	}
	upper, work, newRoot := filepath.Join(scratch, "upper"), filepath.Join(scratch, "work"), filepath.Join(scratch, "root")
	for _, d := range []string{upper, work, newRoot} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", root, upper, work)
	if err := unix.Mount("overlay", newRoot, "overlay", 0, opts); err != nil {
		return fmt.Errorf("overlay %s: %w", opts, err)
	}
	type m struct {
		src, dst, fstype string
		flags            uintptr
	}
	mounts := []m{
		{"proc", "/proc", "proc", 0},
		{"/sys", "/sys", "", unix.MS_BIND | unix.MS_REC},
		{"/dev", "/dev", "", unix.MS_BIND | unix.MS_REC},
		{"/tmp", "/tmp", "", unix.MS_BIND | unix.MS_REC},
		{"tmpfs", "/run", "tmpfs", 0},
	}
	if o.privateTmp {
		mounts[3] = m{"tmpfs", "/tmp", "tmpfs", 0}
	}
	if _, err := os.Stat("/usr/lib/wsl"); err == nil {
		mounts = append(mounts, m{"/usr/lib/wsl", "/usr/lib/wsl", "", unix.MS_BIND | unix.MS_REC})
	}
	for _, b := range binds {
		src, dst, ok := strings.Cut(b, ":")
		if !ok {
			dst = src
		}
		mounts = append(mounts, m{src, dst, "", unix.MS_BIND | unix.MS_REC})
	}
	for _, mt := range mounts {
		dst := filepath.Join(newRoot, mt.dst)
		if err := mkTarget(mt.src, dst); err != nil {
			return err
		}
		if err := unix.Mount(mt.src, dst, mt.fstype, mt.flags, ""); err != nil {
			return fmt.Errorf("mount %s on %s: %w", mt.src, dst, err)
		}
	}
	if o.cgroup2 {
		cg := filepath.Join(newRoot, "sys/fs/cgroup")
		// Detach the bound v1 hierarchies, then mount the unified one.
		if err := unix.Unmount(cg, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("unmount %s: %w", cg, err)
		}
		if err := unix.Mount("cgroup2", cg, "cgroup2", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
			return fmt.Errorf("mount cgroup2 on %s: %w", cg, err)
		}
	}
	if o.readOnly {
		if err := unix.Mount("", newRoot, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY, ""); err != nil {
			return fmt.Errorf("make %s read-only: %w", newRoot, err)
		}
	}
	// runc's way: pivot_root(".", ".") stacks the old root on the new one;
	// detaching it leaves the new root alone, with no directory for it.
	if err := unix.Chdir(newRoot); err != nil {
		return err
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		return fmt.Errorf("pivot_root %s: %w", newRoot, err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detach the old root: %w", err)
	}
	return unix.Chdir("/")
}

// mkTarget makes dst a directory, or an empty file when src is not one.
func mkTarget(src, dst string) error {
	if fi, err := os.Stat(src); err == nil && !fi.IsDir() {
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		f, err := os.OpenFile(dst, os.O_CREATE|os.O_RDONLY, 0o644)
		if err != nil {
			return err
		}
		return f.Close()
	}
	return os.MkdirAll(dst, 0o755)
}
