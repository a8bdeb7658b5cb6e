package devcgroup

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/devnode"
)

// Allow lets the container whose init process has host pid pid read, write
// and mknod each of devs, through whichever device cgroup restricts it (see
// the package documentation). rules is the bundle's linux.resources.devices,
// the rules the runtime applied; cgroup v2 needs them to rebuild its program.
// Allowing several devices in one call finds the cgroup once and, on cgroup
// v2, replaces the program once.
//
// Call it as root in the host's mount, cgroup and user namespaces, after the
// runtime applied its cgroup settings (prestart or createRuntime). If the pid
// has neither a v1 devices cgroup nor a v2 device program, it changes nothing
// and returns nil.
func Allow(pid int, rules []specs.LinuxDeviceCgroup, devs ...devnode.Node) error {
	if len(devs) == 0 {
		return nil
	}
	for _, dev := range devs {
		if err := validate(dev); err != nil {
			return err
		}
	}
	target, err := targetRules(rules, devs...)
	if err != nil {
		return fmt.Errorf("device rules of the bundle's config.json: %w", err)
	}

	// No runtime.LockOSThread around the mount table read and the opens
	// that follow: every thread the Go runtime may move this goroutine to
	// shares one mount namespace (a thread that leaves it stays locked to
	// its goroutine, see nsenter), and the first LockOSThread of a process
	// costs a new OS thread.
	cgFile := "/proc/" + strconv.Itoa(pid) + "/cgroup"
	cgFd, err := openProcFile(cgFile)
	if err != nil {
		return fmt.Errorf("open %q: %w: is pid %d (the container's init) still running?", cgFile, err, pid)
	}
	member, err := parseProcCgroup(cgFd)
	unix.Close(int(cgFd))
	if err != nil {
		return fmt.Errorf("parse %q: %w", cgFile, err)
	}
	// Only cgroup mounts matter (findMount), and a host running many
	// containers has hundreds of others.
	mountsFd, err := openProcFile("/proc/thread-self/mountinfo")
	if err != nil {
		return fmt.Errorf("read the mount table: %w", err)
	}
	mounts, err := cgroupMounts(mountsFd)
	unix.Close(int(mountsFd))
	if err != nil {
		return fmt.Errorf("read the mount table: %w", err)
	}

	// Resolve both hierarchies before changing anything.
	var v1, v2 *location
	if member.devices != "" {
		loc, ok, err := findMount(mounts, false, member.devices)
		if err != nil {
			return fmt.Errorf("devices cgroup of pid %d: %w", pid, err)
		}
		if !ok {
			return fmt.Errorf("pid %d is in devices cgroup %q, but no cgroup v1 devices hierarchy is mounted here: run the hook in the host's mount namespace", pid, member.devices)
		}
		v1 = &loc
	}
	if member.unified != "" {
		loc, ok, err := findMount(mounts, true, member.unified)
		if err != nil {
			return fmt.Errorf("cgroup v2 of pid %d: %w", pid, err)
		}
		if ok {
			v2 = &loc
		}
	}

	if v1 != nil {
		if err := allowV1(*v1, devs); err != nil {
			return err
		}
	}
	if v2 != nil {
		if err := allowV2(*v2, target); err != nil {
			return err
		}
	}
	return nil
}

// allowV1 appends an rwm rule for each of devs to the cgroup's
// devices.allow, one write per rule as the kernel reads them. It refuses
// one (EPERM) unless the parent cgroup allows the device.
func allowV1(loc location, devs []devnode.Node) error {
	dirFd, err := openCgroupDir(loc, unix.CGROUP_SUPER_MAGIC, unix.O_PATH)
	if err != nil {
		return err
	}
	defer unix.Close(dirFd)

	fd, err := unix.Openat2(dirFd, "devices.allow", &unix.OpenHow{
		Flags:   unix.O_WRONLY | unix.O_CLOEXEC,
		Resolve: resolveInCgroupfs,
	})
	if err != nil {
		return fmt.Errorf("open %q: %w%s", loc.dir()+"/devices.allow", err, hint(err))
	}
	defer unix.Close(fd)
	for _, dev := range devs {
		rule := dev.String() + " rwm"
		if _, err := unix.Write(fd, []byte(rule)); err != nil {
			return fmt.Errorf("write %q to %q: %w%s", rule, loc.dir()+"/devices.allow", err, hint(err))
		}
	}
	return nil
}

// procFile reads a procfs file through its bare descriptor. os.Open would
// add an fcntl and a failed epoll registration per file, and stat the
// mount table first (mountinfo.GetMounts).
type procFile int

func openProcFile(name string) (procFile, error) {
	fd, err := unix.Open(name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: name, Err: err}
	}
	return procFile(fd), nil
}

func (f procFile) Read(p []byte) (int, error) {
	for {
		n, err := unix.Read(int(f), p)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return 0, err
		case n == 0 && len(p) > 0:
			return 0, io.EOF
		}
		return n, nil
	}
}

// allowV2 replaces the cgroup's device programs, if it has any, by one built
// from target. Programs only ever narrow access and must all allow, so adding
// one could not help.
func allowV2(loc location, target []rule) error {
	dir := loc.dir()
	// BPF_PROG_QUERY and BPF_PROG_ATTACH refuse O_PATH descriptors.
	dirFd, err := openCgroupDir(loc, unix.CGROUP2_SUPER_MAGIC, unix.O_RDONLY)
	if err != nil {
		return err
	}
	defer unix.Close(dirFd)

	before, err := deviceProgramIDs(dirFd)
	if err != nil {
		return fmt.Errorf("list the device programs of %q: %w%s", dir, err, hint(err))
	}
	if len(before) == 0 {
		return nil // nothing restricts devices in this hierarchy
	}
	prog, err := deviceProgram(target)
	if err != nil {
		return fmt.Errorf("device rules of the bundle's config.json: %w", err)
	}
	if err := replaceDevicePrograms(dirFd, before, prog); err != nil {
		return fmt.Errorf("replace the device programs %v of %q: %w%s", before, dir, err, hint(err))
	}

	// Programs this process may not open (LSM policy) are skipped, as runc
	// skips them; make sure exactly the new program decides now.
	after, err := deviceProgramIDs(dirFd)
	if err != nil {
		return fmt.Errorf("list the device programs of %q after replacing them: %w", dir, err)
	}
	if len(after) != 1 || slices.Contains(before, after[0]) {
		return fmt.Errorf("replace the device programs of %q: programs %v attached before, %v after, want one new one: something else manages this cgroup's devices; give the container the device through CDI or --device instead", dir, before, after)
	}
	return nil
}

// resolveInCgroupfs keeps a lookup below its starting directory and on its
// file system, with no symlink of any kind on the way.
const resolveInCgroupfs = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS |
	unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV

// openCgroupDir opens loc's cgroup directory with flags (O_PATH or
// O_RDONLY). It is equivalent to open(mountpoint + "/" + rel), but checks
// that the mount point holds the mounted hierarchy (device number and file
// system magic) and resolves rel without leaving it.
func openCgroupDir(loc location, magic int64, flags int) (int, error) {
	mnt := loc.mount.Mountpoint
	mntFd, err := unix.Open(mnt, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open cgroup mount %q: %w", mnt, err)
	}
	defer unix.Close(mntFd)
	var st unix.Stat_t
	if err := unix.Fstat(mntFd, &st); err != nil {
		return -1, fmt.Errorf("stat cgroup mount %q: %w", mnt, err)
	}
	var sfs unix.Statfs_t
	if err := unix.Fstatfs(mntFd, &sfs); err != nil {
		return -1, fmt.Errorf("statfs cgroup mount %q: %w", mnt, err)
	}
	if int(unix.Major(st.Dev)) != loc.mount.Major || int(unix.Minor(st.Dev)) != loc.mount.Minor || sfs.Type != magic {
		return -1, fmt.Errorf("%q is not the cgroup mount listed in the mount table (device %d:%d, file system %#x): something is mounted over it", mnt, unix.Major(st.Dev), unix.Minor(st.Dev), sfs.Type)
	}

	dir := loc.dir()
	fd, err := unix.Openat2(mntFd, loc.rel, &unix.OpenHow{
		Flags:   uint64(flags) | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: resolveInCgroupfs,
	})
	switch {
	case errors.Is(err, unix.ENOSYS):
		return -1, fmt.Errorf("open %q: openat2: %w: Linux 5.6 or later is needed", dir, err)
	case errors.Is(err, unix.ENOENT):
		return -1, fmt.Errorf("open %q: %w: the container's cgroup is gone (did its init exit?)", dir, err)
	case err != nil:
		return -1, fmt.Errorf("open %q: %w", dir, err)
	}
	return fd, nil
}

// hint says what to do about a refused cgroup or bpf operation, as a
// ": ..." suffix, or "" when there is nothing useful to say.
func hint(err error) string {
	if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
		return ": the hook must run as root in the host's user and cgroup namespaces, and the parent cgroup must allow the device (rootless containers: use CDI or --device /dev/dxg instead)"
	}
	return ""
}
