package gpuplan

import (
	"fmt"
	"path"
	"strings"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/devnode"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/driverstore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/probed"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/wsl"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/capability"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/edits"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/mounts"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/oci"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/request"
)

// Stage is the OCI hook stage the hook runs at.
type Stage string

// Stages the hook serves.
const (
	// Prestart and CreateRuntime run in the runtime's namespaces: the
	// hook enters the container's mount namespace itself.
	Prestart      Stage = "prestart"
	CreateRuntime Stage = "createRuntime"
	// CreateContainer runs inside the container's mount namespace and
	// device cgroup already.
	CreateContainer Stage = "createContainer"
)

// Valid reports whether s is a stage the hook serves.
func (s Stage) Valid() bool {
	return s == Prestart || s == CreateRuntime || s == CreateContainer
}

// Container is what the hook knows of the container.
type Container struct {
	Stage   Stage
	Request request.Selection
	// Pid is the container's init on the host (from the OCI state).
	Pid int
	// RuntimeNode: the spec lists /dev/dxg in linux.devices, so the
	// runtime makes the node (CDI or the wsl-gpu-runtime wrapper put it
	// there) and allows it in the device cgroup.
	RuntimeNode bool
	// LibDirMounted: the spec mounts the lib dir: an engine injected a CDI
	// device, with its driver folders.
	LibDirMounted bool
	// UserNamespace: the container has a user namespace of its own.
	UserNamespace bool
	// Rootless: the hook itself runs in a user namespace, a rootless
	// engine's, as an ordinary user on the host.
	Rootless bool
	// Injected: the caller is the CDI spec's own hook: the engine made the
	// node, the lib dir mount and the device rule. The spec names no
	// driver folder (a driver update renames it), so the hook binds the
	// selected adapters' current folders, writes the loader files and
	// links nvidia-smi.
	Injected bool
	// Caps are the capabilities asked for besides compute (package
	// capability); zero means compute only.
	Caps capability.Set
}

// FromSpec reads what the decision needs from a container's config. The
// caller sets Rootless (userns.RunningInUserNS) once Skip said to go on, and
// Injected when it is the CDI spec's hook.
func FromSpec(spec *oci.Spec, stage Stage, pid int, req request.Selection) Container {
	return Container{
		Stage:         stage,
		Request:       req,
		Pid:           pid,
		RuntimeNode:   spec.HasDevice(wsl.Device),
		LibDirMounted: spec.HasMount(wsl.LibDir),
		UserNamespace: spec.UserNamespace(),
	}
}

// Skip returns why the container is to be left alone, or "".
func (c Container) Skip() string {
	switch {
	case c.Request.None():
		source := c.Request.Source
		if source == "" {
			source = "no request variable set"
		}
		return fmt.Sprintf("no GPU requested (%s): nothing to do", source)
	case c.RuntimeNode && c.LibDirMounted && !c.Injected:
		return fmt.Sprintf("the container has the GPU already: its spec lists %s and mounts %s (a CDI device): nothing to do", wsl.Device, wsl.LibDir)
	}
	return ""
}

// Cgroup says where the node is allowed in a device cgroup.
type Cgroup int

// Device-cgroup steps.
const (
	// CgroupNone leaves device cgroups alone: a rootless hook may not
	// touch them (and a rootless runtime set none), and a CDI device's
	// rule is the runtime's.
	CgroupNone Cgroup = iota
	// CgroupInit allows the node in the cgroup of the container's init.
	CgroupInit
	// CgroupSelf allows the node in the hook's own cgroup, which is the
	// container's, before the hook enumerates the host: until then it
	// cannot open the node.
	CgroupSelf
)

func (g Cgroup) String() string {
	switch g {
	case CgroupInit:
		return "allow in the container's device cgroup"
	case CgroupSelf:
		return "allow in the hook's own (the container's) device cgroup"
	}
	return "leave device cgroups alone"
}

// Cgroup decides the device-cgroup step. It needs nothing from the host,
// so a createContainer hook can act on it before it enumerates.
func (c Container) Cgroup() Cgroup {
	switch {
	case c.Rootless, c.Injected:
		return CgroupNone
	case c.Stage == CreateContainer:
		return CgroupSelf
	}
	return CgroupInit
}

// Plan is the whole decision for one container.
type Plan struct {
	// Skip, when not "", says why nothing is done; nothing else is set.
	Skip string
	// Cgroup is the device-cgroup step, done first.
	Cgroup Cgroup
	// Node is the device to allow.
	Node devnode.Node
	// EnterMountNS: the steps are applied in the container's mount
	// namespace, entered through Pid.
	EnterMountNS bool
	Pid          int
	// Selected are the adapters the request selected, in host order.
	Selected []driverstore.Adapter
	// Warnings are selected adapters the container gets without their
	// driver folder.
	Warnings []error
	// Steps are the changes to the container's root filesystem.
	Steps []mounts.Step
	// Nodes are the further devices (/dev/dri) allowed like Node.
	Nodes []devnode.Node
	// Stack is what the vendor stacks and capabilities add (see
	// stack.go): its mounts and devices are among Steps; its variables a
	// hook cannot set, so the caller logs them for the user.
	Stack edits.Stack
	// Edits is the whole of what the container gets, whatever carries it
	// in; Steps is its form for this hook, less what the engine did.
	Edits edits.Edits
}

// String is the plan as the hook logs it.
func (p Plan) String() string {
	if p.Skip != "" {
		return p.Skip
	}
	steps := make([]string, 0, len(p.Steps)+1)
	if p.Cgroup != CgroupNone {
		nodes := []string{p.Node.String()}
		for _, n := range p.Nodes {
			nodes = append(nodes, n.String())
		}
		steps = append(steps, fmt.Sprintf("cgroup %s: %s", strings.Join(nodes, ", "), p.Cgroup))
	}
	for _, s := range p.Steps {
		steps = append(steps, s.String())
	}
	return strings.Join(steps, "; ")
}

// EntersMountNS says whether the plan's steps are applied in the
// container's mount namespace, entered through its pid: a hook that runs
// before the container's namespace is its own (prestart, createRuntime).
func (c Container) EntersMountNS() bool {
	return c.Stage != CreateContainer && !c.Injected
}

// Decide computes the plan for container c on host h.
func Decide(c Container, h probed.Host) (Plan, error) {
	if why := c.Skip(); why != "" {
		return Plan{Skip: why}, nil
	}
	p := Plan{Cgroup: c.Cgroup(), Node: h.Node, Pid: c.Pid}
	if c.EntersMountNS() {
		if c.Pid <= 0 {
			return Plan{}, fmt.Errorf("container state has no pid: run the hook as a prestart or createRuntime hook")
		}
		p.EnterMountNS = true
	}
	inv := h.Inventory
	if inv == nil {
		inv = &driverstore.Inventory{}
	}
	selected, err := request.Adapters(c.Request, inv.Adapters)
	if err != nil {
		return Plan{}, err
	}
	p.Selected = selected

	var folders []string
	spellings := map[string]string{}
	var firstErr error
	seen := map[string]bool{}
	nvidia := false
	for _, a := range selected {
		if a.Err != nil {
			// The device and lib dir still serve the others; a request
			// for this adapter alone gets no driver files, so say why.
			if !c.Request.All && len(selected) == 1 {
				return Plan{}, a.Err
			}
			p.Warnings = append(p.Warnings, a.Err)
			if firstErr == nil {
				firstErr = a.Err
			}
			continue
		}
		if !seen[a.Folder] {
			seen[a.Folder] = true
			folders = append(folders, a.Folder)
			if a.Registry != "" && a.Registry != a.Folder {
				spellings[a.Folder] = a.Registry
			}
		}
		nvidia = nvidia || a.Vendor == driverstore.NVIDIA
	}
	// Without a single driver folder no vendor's stack can load: a
	// container started so would only look as if it had a GPU.
	if len(folders) == 0 && firstErr != nil {
		return Plan{}, firstErr
	}

	stack := stackEdits(c, inv, selected, h.Stack)
	in := edits.Inputs{
		Device: h.Node,
		// A node made on a /dev the container's user namespace mounted
		// could not be opened there, and a rootless hook may not make one:
		// bind the host's instead.
		BindDevice: c.UserNamespace || c.Rootless,
		LibDir:     inv.LibDir,
		DriversDir: inv.DriversDir,
		Folders:    folders,
		Spellings:  spellings,
		Ldcache:    h.Ldcache,
		Stack:      stack,
	}
	if nvidia {
		in.NvidiaSmi = NvidiaSmiLink(h.NvidiaSmi, folders)
	}
	p.Edits = edits.For(in)
	p.Stack = stack
	for _, d := range p.Edits.Devices {
		p.Nodes = append(p.Nodes, d.Node)
	}
	p.Steps = p.Edits.Steps(edits.Done{
		// The engine made the node and the lib dir mount from the CDI
		// spec; the folders are the hook's (see pkg/setup/cdispec).
		Node: c.Injected, LibDir: c.Injected,
		// The runtime made the nodes, usable in any user namespace (the
		// wrapper put them in the spec); a bind over them would gain
		// nothing.
		Nodes: c.UserNamespace && c.RuntimeNode,
	})
	return p, nil
}

// NvidiaSmiLink is the container path nvidia-smi is linked to, for a
// container given folders: WSL puts it in the lib dir; older drivers only
// in the driver store folder. "" when there is none to link.
func NvidiaSmiLink(have driverstore.NvidiaSmi, folders []string) string {
	if have.InLibDir {
		return path.Join(wsl.LibDir, "nvidia-smi")
	}
	for _, f := range folders {
		for _, h := range have.Folders {
			if h == f {
				return path.Join(wsl.DriversDir, f, "nvidia-smi")
			}
		}
	}
	return ""
}
