package mounts

import (
	"fmt"
	"path"
	"strings"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/devnode"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/ldcache"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/wsl"
)

// Paths inside the container. They equal the WSL host paths because
// applications and NVIDIA's loaders look for the driver files there.
const (
	ContainerDevice     = wsl.Device
	ContainerLibDir     = wsl.LibDir
	ContainerDriversDir = wsl.DriversDir
	LdconfFile          = "/etc/ld.so.conf.d/wsl-gpu-hook.conf"
	LdcacheFile         = "/etc/ld.so.cache"
	NvidiaSmiLink       = "/usr/bin/nvidia-smi"
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

// Inputs is everything a plan depends on.
type Inputs struct {
	Device devnode.Node
	// LibDir is the host lib dir, mounted whole: it holds the loaders every
	// vendor's stack starts from (libdxcore, libd3d12, libcuda).
	LibDir string
	// DriversDir is the host drivers dir; Folders are the selected folder
	// names under it.
	DriversDir string
	Folders    []string
	// Spellings maps a folder of Folders to the name the container will
	// look it up by, where that differs from its name on disk (in case
	// only: the registry's spelling). The folder is mounted under that name
	// and the on-disk name becomes a link to it, so both resolve.
	Spellings map[string]string
	// NvidiaSmi, when set, is the container path nvidia-smi is linked to.
	NvidiaSmi string
	// Ldcache is nil when the loader cache is not to be touched.
	Ldcache []ldcache.Entry
	// BindDevice binds the host's node at ContainerDevice: set it when the
	// container has a user namespace of its own.
	BindDevice bool
}

// Plan computes the steps for in. It does no I/O.
func Plan(in Inputs) []Step {
	steps := []Step{
		{Kind: Device, Target: ContainerDevice, Source: in.Device.Path, Major: in.Device.Major, Minor: in.Device.Minor, BindNode: in.BindDevice},
		{Kind: Bind, Source: in.LibDir, Target: ContainerLibDir},
	}
	for _, f := range in.Folders {
		name := f
		if s := in.Spellings[f]; s != "" {
			name = s
		}
		steps = append(steps, Step{
			Kind:   Bind,
			Source: path.Join(in.DriversDir, f),
			Target: path.Join(ContainerDriversDir, name),
		})
		if name != f {
			steps = append(steps, Step{Kind: Symlink, Target: path.Join(ContainerDriversDir, f), Source: name})
		}
	}
	// Only the lib dir goes into the loader configuration, as WSL itself
	// does: listing a read-only driver folder holding libcuda.so.1.1 makes
	// ldconfig record a libcuda.so.1 that does not exist there, which then
	// shadows the working loader in the lib dir.
	steps = append(steps, Step{Kind: File, Target: LdconfFile, Data: []byte(ContainerLibDir + "\n"), NeedsGlibc: true})
	if in.Ldcache != nil {
		steps = append(steps, Step{Kind: Ldcache, Target: LdcacheFile, Entries: in.Ldcache, NeedsGlibc: true})
	}
	if in.NvidiaSmi != "" {
		steps = append(steps, Step{Kind: Symlink, Target: NvidiaSmiLink, Source: in.NvidiaSmi})
	}
	return steps
}
