package edits

import (
	"path"
	"strings"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/mounts"
)

// Done is what was put into the container before the hook runs, which
// its steps leave out.
type Done struct {
	// Nodes: the runtime made every node from the spec (CDI, the
	// wrapper), usable in any user namespace.
	Nodes bool
	// Node and LibDir: the engine made /dev/dxg and mounted the lib dir
	// from a CDI spec.
	Node, LibDir bool
}

// Steps is e as the hook's steps for package mounts, without what done
// says is there already. Order: /dev/dxg, the WSL driver files, the
// loader files that name them, the links, then the stacks' nodes and
// binds.
func (e Edits) Steps(done Done) []mounts.Step {
	steps := make([]mounts.Step, 0, len(e.Mounts)+len(e.Devices)+len(e.Files)+len(e.Links)+2)
	if e.Node.Path != "" && !done.Nodes && !done.Node {
		steps = append(steps, deviceStep(e.Node))
	}
	var others []Mount
	for _, m := range e.Mounts {
		switch {
		case !underWSL(m.Target):
			others = append(others, m)
		case done.LibDir && m.Target == ContainerLibDir:
		default:
			steps = append(steps, mountStep(m))
			if m.Alias != "" {
				steps = append(steps, mounts.Step{Kind: mounts.Symlink, Target: m.Alias, Source: path.Base(m.Target)})
			}
		}
	}
	for _, f := range e.Files {
		steps = append(steps, mounts.Step{Kind: mounts.File, Target: f.Path, Data: f.Data, NeedsGlibc: f.NeedsGlibc})
	}
	if e.Ldcache != nil {
		steps = append(steps, mounts.Step{Kind: mounts.Ldcache, Target: LdcacheFile, Entries: e.Ldcache, NeedsGlibc: true})
	}
	for _, l := range e.Links {
		steps = append(steps, mounts.Step{Kind: mounts.Symlink, Target: l.Path, Source: l.Target})
	}
	if !done.Nodes {
		for _, d := range e.Devices {
			steps = append(steps, deviceStep(d))
		}
	}
	for _, m := range others {
		steps = append(steps, mountStep(m))
	}
	return steps
}

func underWSL(p string) bool {
	return p == ContainerLibDir || p == ContainerDriversDir || strings.HasPrefix(p, ContainerDriversDir+"/")
}

func deviceStep(d Device) mounts.Step {
	return mounts.Step{Kind: mounts.Device, Target: d.Path, Source: d.Node.Path, Major: d.Node.Major, Minor: d.Node.Minor, BindNode: d.Bind}
}

func mountStep(m Mount) mounts.Step {
	kind := mounts.Bind
	if m.File {
		kind = mounts.BindFile
	}
	return mounts.Step{Kind: kind, Source: m.Source, Target: m.Target}
}
