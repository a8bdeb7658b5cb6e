// Package devnode is the one description of a host device node (the GPU's
// /dev/dxg) and the one place it is looked at on the host.
//
// Everything that needs the node's numbers (the container's node, its
// device-cgroup rule, a bundle's linux.devices, a CDI spec) takes a Node that
// Stat returned, so they can never disagree about which device it is.
package devnode

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/dxcore"
)

// Node is a character device on the host, as stat found it.
type Node struct {
	// Path is the host path the node was found at.
	Path         string
	Major, Minor uint32
}

// String is the node as a device cgroup rule names it: "c 10:63".
func (n Node) String() string { return fmt.Sprintf("c %d:%d", n.Major, n.Minor) }

// Rdev is the node's device number as stat and mknod take it.
func (n Node) Rdev() uint64 { return unix.Mkdev(n.Major, n.Minor) }

// Stat returns the character device at path. Its errors say what to do: a
// missing node is dxcore.ErrNoDevice, not a WSL2 VM with GPU
// paravirtualization.
func Stat(path string) (Node, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		if errors.Is(err, unix.ENOENT) {
			// The same advice as when enumeration cannot open it.
			return Node{}, fmt.Errorf("%s does not exist: %w", path, dxcore.ErrNoDevice)
		}
		return Node{}, fmt.Errorf("stat %s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFCHR {
		return Node{}, fmt.Errorf("%s is not a character device: point dxg_device in the config at WSL's GPU device", path)
	}
	return Node{Path: path, Major: unix.Major(st.Rdev), Minor: unix.Minor(st.Rdev)}, nil
}
