package hostview

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
)

// Paths inside the simulated tree and where they appear.
const (
	wslDir  = "/usr/lib/wsl"
	devNode = "/dev/dxg"
)

// Setup mounts dir/usr/lib/wsl read-only at /usr/lib/wsl and creates the
// device node /dev/dxg (character device rdev, permission bits mode) in
// the calling process's mount namespace, which must already be private to
// it.
func Setup(dir string, mode uint32, rdev uint64) error {
	src := filepath.Join(dir, wslDir)
	if fi, err := os.Stat(src); err != nil || !fi.IsDir() {
		return fmt.Errorf("simulated host %q has no directory %s: generate the fixture first", dir, wslDir)
	}
	// Defence in depth: the namespace was created private, but nothing
	// below may ever propagate to the host.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make / private in the new mount namespace: %w", err)
	}
	if err := ensureDir(wslDir); err != nil {
		return err
	}
	if err := unix.Mount(src, wslDir, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s on %s: %w", src, wslDir, err)
	}
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
	if err := unix.MountSetattr(unix.AT_FDCWD, wslDir, unix.AT_RECURSIVE, &attr); err != nil {
		return fmt.Errorf("make %s read-only: %w", wslDir, err)
	}
	// /dev is always overlaid so the node lands in the namespace's tmpfs,
	// even on a machine that has a /dev/dxg of its own.
	if err := overlay("/dev"); err != nil {
		return err
	}
	if err := os.Remove(devNode); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("hide the host's %s: %w", devNode, err)
	}
	if err := unix.Mknod(devNode, unix.S_IFCHR|mode, int(rdev)); err != nil {
		return fmt.Errorf("create %s: %w", devNode, err)
	}
	// mknod obeys the umask; the node's mode is part of the simulation.
	if err := unix.Chmod(devNode, mode); err != nil {
		return fmt.Errorf("chmod %s: %w", devNode, err)
	}
	return nil
}

// ensureDir makes path exist as a directory, overlaying its parent when it
// does not exist on the host.
func ensureDir(path string) error {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return nil
	}
	if err := overlay(filepath.Dir(path)); err != nil {
		return err
	}
	if err := os.Mkdir(path, 0o755); err != nil {
		return fmt.Errorf("create mountpoint %s: %w", path, err)
	}
	return nil
}

// overlay makes dir writable in this namespace only: an overlay with the
// original dir as its lower layer and a private tmpfs for upper and work,
// with dir's submounts bound again on top.
func overlay(dir string) error {
	subs, err := submounts(dir)
	if err != nil {
		return err
	}
	// Keep a handle on the original dir: once the tmpfs covers it, this is
	// the only way to name it (overlay lowerdir, the submounts).
	lower, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", dir, err)
	}
	defer unix.Close(lower)
	lowerPath := fmt.Sprintf("/proc/self/fd/%d", lower)

	if err := unix.Mount("dxgsim", dir, "tmpfs", 0, "mode=0755"); err != nil {
		return fmt.Errorf("mount tmpfs on %s: %w", dir, err)
	}
	upper, work := filepath.Join(dir, "upper"), filepath.Join(dir, "work")
	for _, d := range []string{upper, work} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return fmt.Errorf("create overlay directory: %w", err)
		}
	}
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", lowerPath, upper, work)
	if err := unix.Mount("dxgsim", dir, "overlay", 0, opts); err != nil {
		return fmt.Errorf("mount overlay on %s (%s): %w", dir, opts, err)
	}
	for _, rel := range subs {
		src, dst := filepath.Join(lowerPath, rel), filepath.Join(dir, rel)
		if _, err := os.Lstat(src); err != nil {
			continue // shadowed by another mount; the host does not see it either
		}
		if err := unix.Mount(src, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind %s again on the overlay: %w", filepath.Join(dir, rel), err)
		}
	}
	return nil
}

// submounts lists the outermost mountpoints strictly below dir, relative
// to it; binding each recursively carries everything deeper.
func submounts(dir string) ([]string, error) {
	mounts, err := mountinfo.GetMounts(mountinfo.PrefixFilter(dir))
	if err != nil {
		return nil, fmt.Errorf("list mounts below %s: %w", dir, err)
	}
	return outermost(mounts, dir), nil
}

// outermost keeps, of mounts, the mountpoints strictly below dir that no
// other one of them contains, relative to dir and sorted. mountinfo has
// already decoded the kernel's octal escapes (\040 for a space).
func outermost(mounts []*mountinfo.Info, dir string) []string {
	seen := map[string]bool{}
	for _, m := range mounts {
		if rel, ok := strings.CutPrefix(m.Mountpoint, dir+"/"); ok && rel != "" {
			seen[rel] = true
		}
	}
	var outer []string
	for rel := range seen {
		if !hasAncestor(seen, rel) {
			outer = append(outer, rel)
		}
	}
	sort.Strings(outer)
	return outer
}

func hasAncestor(set map[string]bool, rel string) bool {
	for i := strings.LastIndexByte(rel, '/'); i > 0; i = strings.LastIndexByte(rel[:i], '/') {
		if set[rel[:i]] {
			return true
		}
	}
	return false
}
