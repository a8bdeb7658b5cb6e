// Command floorhook is the floor of a warm GPU start: a prestart hook that
// makes the same changes to the container as wsl-gpu-hook's warm start
// does, with every decision made beforehand, and nothing else. bench-start
// runs the real hook once, keeps the folders it bound and the loader cache
// it wrote in a directory (-from), and runs this next to it.
//
// What it does is what no hook can leave out on WSL: the two stats of the
// lib dir and the drivers dir (the check that no driver was updated; a
// round trip each on 9p), the device cgroup rule, entering the container's
// mount namespace, /dev/dxg, the mount points, the three read-only binds
// (a 9p lookup for each driver folder), the ld.so.conf.d file and the
// loader cache (the image's read, the merged one written), the nvidia-smi
// link. What it leaves out is the hook's own work: the configuration,
// config.json, the probe cache, the decisions, the log, the undo on
// failure, and the confinement of paths to the rootfs (plain openat here),
// so it is a floor, not a hook anyone should run.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "floorhook:", err)
		os.Exit(1)
	}
}

func run() error {
	lib := flag.String("lib", "", "the host's lib dir")
	drivers := flag.String("drivers", "", "the host's drivers dir")
	dev := flag.String("dev", "", "the host's /dev/dxg")
	from := flag.String("from", "", "the dir with the folders to bind (folders, one a line) and the loader cache to write (ld.so.cache)")
	allow := flag.String("devices-allow", "", "the container's cgroup v1 devices.allow, if any")
	flag.Parse()

	state, err := io.ReadAll(os.Stdin)
	if err != nil {
		return err
	}
	pid, bundle, err := pidAndBundle(state)
	if err != nil {
		return err
	}
	folders, err := os.ReadFile(*from + "/folders")
	if err != nil {
		return err
	}
	cache, err := os.ReadFile(*from + "/ld.so.cache")
	if err != nil {
		return err
	}
	var st unix.Stat_t
	for _, d := range []string{*lib, *drivers} {
		if err := unix.Stat(d, &st); err != nil {
			return fmt.Errorf("stat %s: %w", d, err)
		}
	}
	if err := unix.Stat(*dev, &st); err != nil {
		return err
	}
	rdev := st.Rdev
	if *allow != "" {
		fd, err := unix.Open(*allow, unix.O_WRONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		rule := fmt.Sprintf("c %d:%d rwm", unix.Major(rdev), unix.Minor(rdev))
		if _, err := unix.Write(fd, []byte(rule)); err != nil {
			return err
		}
		unix.Close(fd)
	}

	runtime.LockOSThread()
	ns, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/ns/mnt", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	if err := unix.Unshare(unix.CLONE_FS); err != nil {
		return err
	}
	if err := unix.Setns(ns, unix.CLONE_NEWNS); err != nil {
		return err
	}
	root, err := unix.Open(bundle+"/rootfs", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	at := func(dir int, name string) (int, error) {
		return unix.Openat(dir, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	}
	mkdir := func(dir int, name string) (int, error) {
		if err := unix.Mkdirat(dir, name, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
			return -1, err
		}
		return at(dir, name)
	}
	devDir, err := at(root, "dev")
	if err != nil {
		return err
	}
	if err := unix.Mknodat(devDir, "dxg", unix.S_IFCHR|0o666, int(rdev)); err != nil {
		return err
	}
	if err := unix.Fchmodat(devDir, "dxg", 0o666, 0); err != nil {
		return err
	}
	usrLib, err := at(root, "usr/lib")
	if err != nil {
		return err
	}
	wslDir, err := mkdir(usrLib, "wsl")
	if err != nil {
		return err
	}
	libDir, err := mkdir(wslDir, "lib")
	if err != nil {
		return err
	}
	if err := bind(*lib, libDir); err != nil {
		return err
	}
	driversDir, err := mkdir(wslDir, "drivers")
	if err != nil {
		return err
	}
	for _, f := range strings.Fields(string(folders)) {
		target, err := mkdir(driversDir, f)
		if err != nil {
			return err
		}
		if err := bind(*drivers+"/"+f, target); err != nil {
			return err
		}
	}
	confDir, err := at(root, "etc/ld.so.conf.d")
	if err != nil {
		return err
	}
	if err := replace(confDir, "wsl-gpu-hook.conf", []byte("/usr/lib/wsl/lib\n")); err != nil {
		return err
	}
	etc, err := at(root, "etc")
	if err != nil {
		return err
	}
	// The image's cache is read, as a merge must.
	old, err := unix.Openat(etc, "ld.so.cache", unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	buf := make([]byte, len(cache)+1)
	if _, err := unix.Read(old, buf); err != nil {
		return err
	}
	unix.Close(old)
	if err := replace(etc, "ld.so.cache", cache); err != nil {
		return err
	}
	usrBin, err := at(root, "usr/bin")
	if err != nil {
		return err
	}
	return unix.Symlinkat("/usr/lib/wsl/lib/nvidia-smi", usrBin, "nvidia-smi")
}

// bind mounts source read-only, nosuid, nodev onto the directory target.
func bind(source string, target int) error {
	tree, err := unix.OpenTree(unix.AT_FDCWD, source, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return fmt.Errorf("open_tree %s: %w", source, err)
	}
	attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}
	if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH, attr); err != nil {
		return err
	}
	return unix.MoveMount(tree, "", target, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH)
}

// replace writes data to a new file in dir and renames it over name.
func replace(dir int, name string, data []byte) error {
	tmp := "." + name + ".floor"
	fd, err := unix.Openat(dir, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return err
	}
	if _, err := unix.Write(fd, data); err != nil {
		return err
	}
	if err := unix.Close(fd); err != nil {
		return err
	}
	return unix.Renameat(dir, tmp, dir, name)
}

// pidAndBundle reads the two fields of the state it needs, as a scan: the
// state bench-start writes has no escapes in them.
func pidAndBundle(state []byte) (int, string, error) {
	field := func(key string) []byte {
		_, v, ok := bytes.Cut(state, []byte(`"`+key+`":`))
		if !ok {
			return nil
		}
		return v
	}
	p := field("pid")
	n := 0
	for n < len(p) && '0' <= p[n] && p[n] <= '9' {
		n++
	}
	pid, err := strconv.Atoi(string(p[:n]))
	if err != nil {
		return 0, "", fmt.Errorf("no pid in the state: %w", err)
	}
	b := field("bundle")
	if len(b) < 2 || b[0] != '"' {
		return 0, "", errors.New("no bundle in the state")
	}
	bundle, _, ok := bytes.Cut(b[1:], []byte(`"`))
	if !ok {
		return 0, "", errors.New("no bundle in the state")
	}
	return pid, string(bundle), nil
}
