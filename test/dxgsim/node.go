package main

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// nodeRdev is the simulated device's number: /dev/fuse's. Opening it is
// harmless, and it is in no container runtime's default device allow-list,
// so device cgroup enforcement is tested for real.
var nodeRdev = unix.Mkdev(10, 229)

// isSimNode reports whether st is a simulated node.
func isSimNode(st *unix.Stat_t) bool {
	return st.Mode&unix.S_IFMT == unix.S_IFCHR && st.Rdev == nodeRdev
}

// createNode makes the device node at path with permission bits mode.
// A stale simulated node (from a run that was killed) is replaced;
// anything else is left alone.
func createNode(path string, mode uint32) error {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err == nil {
		if !isSimNode(&st) {
			return fmt.Errorf("--dev %s: refusing to replace an existing file that is not a simulated dxg node (char 10:229): pick another path", path)
		}
		if err := os.Remove(path); err != nil {
			return fmt.Errorf("replace stale node: %w", err)
		}
	}
	if err := unix.Mknod(path, unix.S_IFCHR|mode, int(nodeRdev)); err != nil {
		return fmt.Errorf("create device node %s: %w", path, err)
	}
	// mknod obeys the umask; the mode is part of the simulation.
	if err := unix.Chmod(path, mode); err != nil {
		os.Remove(path)
		return fmt.Errorf("chmod %s: %w", path, err)
	}
	return nil
}

// removeNode removes the node createNode made, unless something else has
// taken its place meanwhile.
func removeNode(path string) {
	var st unix.Stat_t
	if unix.Lstat(path, &st) == nil && isSimNode(&st) {
		os.Remove(path)
	}
}
