package hookrun

import (
	"errors"
	"fmt"
	"io"
	"io/fs"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/config"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/driverstore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/capability"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/cdiselect"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/gpuplan"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/hookroot"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/oci"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/request"
)

// Job is one hook run, as its entry read it.
type Job struct {
	Bundle string
	// Rootfs names the container's root filesystem: where the steps go,
	// unless Root is set, and in the log.
	Rootfs string
	// Root, when set, is the root filesystem the entry proved and holds
	// open: the steps go through its descriptor, never through Rootfs.
	Root *hookroot.Root
	// Spec is what the hook read of config.json: empty for a CDI device's
	// hook, which reads none.
	Spec *oci.Spec
	// Container is the container as the decision sees it. Its Request
	// is set by Resolve when that is not nil.
	Container gpuplan.Container
	// Caps is where the capabilities came from, for the log.
	Caps capability.Choice
	// Done, when not "", says why there is nothing to do; Quiet logs it
	// at debug level (a container that asked for nothing).
	Done  string
	Quiet bool
	// Details has the probe read the adapters' types and descriptions,
	// which the selection variables need.
	Details bool
	// Resolve makes the request from the host's adapters: a CDI
	// selection names an adapter by its vendor and its index among that
	// vendor's, which only the inventory resolves.
	Resolve func([]driverstore.Adapter) (request.Selection, error)
}

// OCI is the entry of a prestart, createRuntime or createContainer hook:
// the state from stdin, the request and capabilities from the bundle's
// config.json.
func OCI(stage gpuplan.Stage, cfg config.Config, stdin io.Reader) (*Job, error) {
	st, err := oci.ReadState(stdin)
	if err != nil {
		return nil, err
	}
	spec, err := oci.LoadSpec(st.Bundle)
	if err != nil {
		return nil, err
	}
	rootfs, err := spec.RootPath(st.Bundle)
	if err != nil {
		return nil, err
	}
	req, err := request.FromSpec(spec, cfg.RequestEnv, cfg.RequestAnnotation)
	if err != nil {
		return nil, fmt.Errorf("%w: fix the container's GPU request", err)
	}
	var caps capability.Choice
	if !req.None() {
		if caps, err = capability.FromSpec(spec); err != nil {
			return nil, fmt.Errorf("%w: fix the container's GPU request", err)
		}
	}
	c := gpuplan.FromSpec(spec, stage, st.Pid, req)
	c.Caps = caps.Set
	return &Job{
		Bundle: st.Bundle, Rootfs: rootfs, Spec: spec, Container: c, Caps: caps,
		Done: c.Skip(), Quiet: req.None(),
		// Selection variables (ZE_AFFINITY_MASK, Mesa's adapter name) need
		// the adapters' types and descriptions; a request for all sets none.
		Details: !req.All,
	}, nil
}

// CDI is the entry of a CDI device's createContainer hook: the engine made
// the node, the lib dir mount and the device rule, and set the device's
// variables; selections, the hook's arguments (pkg/start/cdiselect), say which
// adapters' current driver folders to mount. The container's root
// filesystem is the state's or the working directory, taken only once
// package hookroot proved it the container's, and held open from then on.
// A spec written before the selections were arguments runs it with none:
// the selections are then the container's environment, and the root
// filesystem root.path, from config.json.
func CDI(stdin io.Reader, selections []string) (*Job, error) {
	return cdi(stdin, selections, hookroot.Open)
}

// opener is hookroot.Open, or a test's stand-in.
type opener func(path string, src hookroot.Source, bundle string) (*hookroot.Root, error)

func cdi(stdin io.Reader, selections []string, open opener) (*Job, error) {
	st, err := oci.ReadState(stdin)
	if err != nil {
		return nil, err
	}
	j := &Job{Bundle: st.Bundle, Spec: &oci.Spec{}}
	var sel cdiselect.Union
	root, src := ".", hookroot.WorkingDir
	if len(selections) > 0 {
		if sel, err = cdiselect.FromArgs(selections); err != nil {
			return nil, err
		}
		if p, ok := st.RootPath(); ok {
			root, src = p, hookroot.StateRoot
		}
	} else {
		if j.Spec, err = oci.LoadSpec(st.Bundle); err != nil {
			if errors.Is(err, fs.ErrPermission) {
				return nil, fmt.Errorf("%w: this CDI spec predates wsl-gpu-hook's support for containers with a user namespace of their own: regenerate it with wsl-gpu-hook cdi generate", err)
			}
			return nil, err
		}
		if root, err = j.Spec.RootPath(st.Bundle); err != nil {
			return nil, err
		}
		src = hookroot.ConfigRoot
		var env []string
		if j.Spec.Process != nil {
			env = j.Spec.Process.Env
		}
		if sel, err = cdiselect.FromEnv(env); err != nil {
			return nil, err
		}
	}
	j.Container = gpuplan.FromSpec(j.Spec, gpuplan.CreateContainer, st.Pid, request.Selection{})
	j.Container.Injected = true
	j.Resolve = sel.ToSelection
	if len(sel.Selections) == 0 {
		j.Done = "no CDI device of ours selects an adapter: nothing to do"
		return j, nil
	}
	if j.Root, err = open(root, src, st.Bundle); err != nil {
		return nil, err
	}
	j.Rootfs = j.Root.Path
	return j, nil
}

// Close releases what the entry holds open: the root filesystem's
// descriptor, when it opened one.
func (j *Job) Close() error {
	return j.Root.Close()
}
