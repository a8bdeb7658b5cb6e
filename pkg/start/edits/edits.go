package edits

import (
	"path"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/devnode"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/wsl"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/ldcache"
)

// Paths inside the container. The device and the driver dirs equal the
// WSL host paths because applications and NVIDIA's loaders look for the
// driver files there.
const (
	ContainerDevice     = wsl.Device
	ContainerLibDir     = wsl.LibDir
	ContainerDriversDir = wsl.DriversDir
	LdconfFile          = "/etc/ld.so.conf.d/wsl-gpu-hook.conf"
	LdcacheFile         = "/etc/ld.so.cache"
	NvidiaSmiLink       = "/usr/bin/nvidia-smi"
)

// Device-cgroup access the nodes get: /dev/dxg is mknod-able (m) as
// runtimes grant their own nodes; the stacks' nodes are read and written.
const (
	AccessDxg   = "rwm"
	AccessStack = "rw"
)

// Edits is everything a GPU container gets.
type Edits struct {
	// Node is /dev/dxg; a zero Path means none.
	Node Device
	// Devices are further nodes (/dev/dri).
	Devices []Device
	// Mounts are read-only, nosuid, nodev binds, in order.
	Mounts []Mount
	// Files are written whole in the container.
	Files []File
	// Ldcache entries are merged into the image's loader cache; nil
	// leaves it alone.
	Ldcache []ldcache.Entry
	// Links are made where nothing is at their path yet.
	Links []Link
	// Env is NAME=VALUE; a variable the container sets itself wins.
	Env []string
	// Hooks run to do what the form cannot carry.
	Hooks []Hook
}

// Device is a character device node: the host's Node at Path.
type Device struct {
	Path string
	Node devnode.Node
	// Access is the device-cgroup rule's access.
	Access string
	// Bind binds the host's node instead of making one: a node made on a
	// /dev that a user namespace mounted cannot be opened.
	Bind bool
}

// Mount is a read-only, nosuid, nodev bind of a host path.
type Mount struct {
	Source, Target string
	// File marks a bind of a file or socket rather than a directory.
	File bool
	// Alias, when set, is a container path made a link to Target (its
	// last element): a driver folder's on-disk spelling, beside the
	// registry's spelling it is mounted under.
	Alias string
}

// File is a small file written atomically.
type File struct {
	Path string
	Data []byte
	// NeedsGlibc: only an image with glibc's loader reads it; others get
	// a warning instead.
	NeedsGlibc bool
}

// Link is a symlink at Path whose text is Target.
type Link struct{ Path, Target string }

// Hook is an OCI hook to run at Stage.
type Hook struct {
	Stage string
	Path  string
	// Args is the whole argv, argv[0] included.
	Args []string
}

// Inputs is what For builds a container's edits from: the decision
// package gpuplan made for it.
type Inputs struct {
	Device devnode.Node
	// BindDevice binds the host's nodes: the container has a user
	// namespace of its own, or the hook is rootless.
	BindDevice bool
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
	// Stack is what the vendor stacks and capabilities add.
	Stack Stack
}

// For builds the edits for in. It does no I/O.
func For(in Inputs) Edits {
	e := Edits{
		Node:   Device{Path: ContainerDevice, Node: in.Device, Access: AccessDxg, Bind: in.BindDevice},
		Mounts: []Mount{{Source: in.LibDir, Target: ContainerLibDir}},
	}
	for _, f := range in.Folders {
		name := f
		if s := in.Spellings[f]; s != "" {
			name = s
		}
		m := Mount{Source: path.Join(in.DriversDir, f), Target: path.Join(ContainerDriversDir, name)}
		if name != f {
			m.Alias = path.Join(ContainerDriversDir, f)
		}
		e.Mounts = append(e.Mounts, m)
	}
	// Only the lib dir goes into the loader configuration, as WSL itself
	// does: listing a read-only driver folder holding libcuda.so.1.1 makes
	// ldconfig record a libcuda.so.1 that does not exist there, which then
	// shadows the working loader in the lib dir.
	e.Files = []File{{Path: LdconfFile, Data: []byte(ContainerLibDir + "\n"), NeedsGlibc: true}}
	if in.Ldcache != nil {
		e.Ldcache = append(append([]ldcache.Entry{}, in.Ldcache...), in.Stack.Ldcache...)
	}
	if in.NvidiaSmi != "" {
		e.Links = append(e.Links, Link{Path: NvidiaSmiLink, Target: in.NvidiaSmi})
	}
	e.AddStack(in.Stack, in.BindDevice)
	return e
}

// AddStack adds what a vendor stack or capability gives besides the
// driver files: its nodes (bound from the host when bind), binds and
// variables. Its loader-cache entries are For's to merge.
func (e *Edits) AddStack(s Stack, bind bool) {
	for _, d := range s.Devices {
		d.Bind = bind
		e.Devices = append(e.Devices, d)
	}
	e.Mounts = append(e.Mounts, s.Mounts...)
	e.Env = append(e.Env, s.EnvList()...)
}
