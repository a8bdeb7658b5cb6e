package mounts

import (
	"fmt"
	"strings"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/wsl"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/ldcache"
)

// Paths inside the container the steps know of. They equal the WSL host
// paths because applications and NVIDIA's loaders look for the driver
// files there (package edits decides what goes where).
const (
	ContainerLibDir     = wsl.LibDir
	ContainerDriversDir = wsl.DriversDir
)

// Kind names what a Step does.
type Kind string

// Step kinds.
const (
	// Device creates a character device node (mode 0666).
	Device Kind = "device"
	// Bind mounts a host directory read-only, nosuid, nodev.
	Bind Kind = "bind"
	// BindFile mounts a host file or socket read-only, nosuid, nodev onto
	// a file mount point (librocdxg, WSLg's PulseAudio socket).
	BindFile Kind = "bind-file"
	// File writes a small file atomically.
	File Kind = "file"
	// Ldcache merges entries into the image's loader cache.
	Ldcache Kind = "ldcache"
	// Symlink creates a symlink when nothing exists at the target.
	Symlink Kind = "symlink"
)

// Step is one change to the container, as plain data.
type Step struct {
	Kind Kind `json:"kind"`
	// Target is an absolute path inside the container.
	Target string `json:"target"`
	// Source is the host path to bind or whose device numbers to copy, or
	// the link text of a symlink.
	Source       string          `json:"source,omitempty"`
	Major, Minor uint32          `json:",omitempty"`
	Data         []byte          `json:"data,omitempty"`
	Entries      []ldcache.Entry `json:"entries,omitempty"`
	// NeedsGlibc marks steps that only make sense for a glibc image: in
	// an image without glibc's loader they are skipped with a warning.
	NeedsGlibc bool `json:"needsGlibc,omitempty"`
	// BindNode makes a Device step bind the host's node (Source) instead
	// of creating one: a node created on a /dev that a user namespace
	// mounted cannot be opened (the kernel treats such mounts as nodev).
	BindNode bool `json:"bindNode,omitempty"`
}

func (s Step) String() string {
	switch s.Kind {
	case Device:
		if s.BindNode {
			return fmt.Sprintf("device %s c %d:%d bound from %s", s.Target, s.Major, s.Minor, s.Source)
		}
		return fmt.Sprintf("device %s c %d:%d 0666", s.Target, s.Major, s.Minor)
	case Bind:
		return fmt.Sprintf("bind %s -> %s (ro,nosuid,nodev)", s.Source, s.Target)
	case BindFile:
		return fmt.Sprintf("bind file %s -> %s (ro,nosuid,nodev)", s.Source, s.Target)
	case File:
		return fmt.Sprintf("file %s (%d bytes)", s.Target, len(s.Data))
	case Ldcache:
		keys := make([]string, len(s.Entries))
		for i, e := range s.Entries {
			keys[i] = e.Key
		}
		return fmt.Sprintf("ldcache %s += [%s]", s.Target, strings.Join(keys, " "))
	case Symlink:
		return fmt.Sprintf("symlink %s -> %s (if absent)", s.Target, s.Source)
	}
	return fmt.Sprintf("%s %s", s.Kind, s.Target)
}
