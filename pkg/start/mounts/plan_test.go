package mounts

import (
	"path"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/devnode"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/ldcache"
)

// The container paths the tests' steps write to; package edits owns the
// real ones (an import of it here would be a cycle).
const (
	ContainerDevice = "/dev/dxg"
	LdconfFile      = "/etc/ld.so.conf.d/wsl-gpu-hook.conf"
	LdcacheFile     = "/etc/ld.so.cache"
	NvidiaSmiLink   = "/usr/bin/nvidia-smi"
)

// Inputs and Plan build the steps of a GPU container as package edits
// renders them (edits.For(in).Steps), for Apply's tests: TestFor there
// pins the same steps.

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

// Plan computes the steps for in, as edits.For(in).Steps does.
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
