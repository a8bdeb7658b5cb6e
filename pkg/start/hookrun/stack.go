package hookrun

import (
	"fmt"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/config"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/devnode"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/probed"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/stackprobe"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/capability"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/devcgroup"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/edits"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/hooklog"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/oci"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/vendorstack"
)

func stackOptions(cfg config.Config) stackprobe.Options {
	return stackprobe.Options{ROCmDir: cfg.ROCmDir, DRIDir: cfg.DRIDir, WSLgDir: cfg.WSLgDir}
}

// probeStack looks at what the vendor stacks and capabilities need on the
// host (librocdxg, /dev/dri, WSLg), only as far as caps and the host's
// adapters can need it.
func probeStack(cfg config.Config, host probed.Host, caps capability.Set) (vendorstack.Host, error) {
	var adapters []vendorstack.Adapter
	if host.Inventory != nil {
		adapters = vendorstack.FromInventory(host.Inventory.Adapters)
	}
	return stackprobe.For(stackOptions(cfg), adapters, caps|capability.Default)
}

// logStack says what the stacks got that the log should show: what was left
// out and why, and the variables a hook cannot put into the container's
// environment (only CDI devices and the wrapper can), unless it has them.
func logStack(log *hooklog.Logger, spec *oci.Spec, e edits.Stack) {
	for _, n := range e.Notes {
		log.Warnf("%s", n)
	}
	var missing, why []string
	for _, v := range e.Env {
		if got, ok := spec.Env(v.Name); ok && got == v.Value {
			continue
		}
		missing = append(missing, "-e "+v.String())
		why = append(why, v.Name+": "+v.Why)
	}
	if len(missing) > 0 {
		log.Warnf("set in the container yourself (a hook cannot change its environment; CDI devices and the wsl-gpu runtime do): %s (%s)",
			strings.Join(missing, " "), strings.Join(why, "; "))
	}
}

// allowSelfNodes allows the stack's nodes in the hook's own cgroup, which
// is the container's, after allowSelf allowed dxg there.
func allowSelfNodes(spec *oci.Spec, dxg devnode.Node, nodes []devnode.Node) error {
	if len(nodes) == 0 {
		return nil
	}
	pid, err := hostPid()
	if err != nil {
		return err
	}
	major, minor := int64(dxg.Major), int64(dxg.Minor)
	rules := append(spec.DeviceRules(), specs.LinuxDeviceCgroup{Allow: true, Type: "c", Major: &major, Minor: &minor, Access: "rwm"})
	return devcgroup.Allow(pid, rules, nodes...)
}

// allowSelf grants the device to the cgroup this hook runs in: a
// createContainer hook runs inside the container's cgroup (runc starts it
// from the container's init), so it cannot even open /dev/dxg to enumerate
// until the container's device rules allow it.
func allowSelf(spec *oci.Spec, node devnode.Node) error {
	pid, err := hostPid()
	if err != nil {
		return err
	}
	if err := devcgroup.Allow(pid, spec.DeviceRules(), node); err != nil {
		return fmt.Errorf("%w: a createContainer hook runs in the container's device cgroup: put /dev/dxg in the container (wsl-gpu-runtime or CDI) or use the prestart stage", err)
	}
	return nil
}
