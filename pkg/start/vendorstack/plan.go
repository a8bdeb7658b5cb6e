package vendorstack

import (
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/devnode"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/driverstore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/vendors"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/capability"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/edits"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/ldcache"
)

// Paths inside the container.
const (
	// ContainerRocdxg is librocdxg under its SONAME, which ROCm 7.2+ dlopens.
	ContainerRocdxg = "/usr/lib/librocdxg.so.1"
	// ContainerRocdxgDev is the name ROCm 7.1 dlopens and AMD's README binds.
	ContainerRocdxgDev = "/usr/lib/librocdxg.so"
	// ContainerRocdxgShare holds dids.conf, as share/rocdxg of the prefix
	// whose lib holds librocdxg.
	ContainerRocdxgShare = "/usr/share/rocdxg"
	ContainerDRIDir      = "/dev/dri"
	ContainerX11Dir      = "/tmp/.X11-unix"
	ContainerWSLgRuntime = "/mnt/wslg/runtime-dir"
	ContainerPulse       = "/mnt/wslg/PulseServer"
)

// rocdxgSoname is what ROCm 7.2+ dlopens first.
const rocdxgSoname = "librocdxg.so.1"

// Adapter is a GPU as this package needs it.
type Adapter struct {
	// Index is the host's enumeration index.
	Index       int
	Vendor      driverstore.Vendor
	Description string
	// ComputeOnly marks an MCDM adapter (an NPU, a datacenter GPU in
	// compute mode): no graphics, no video, its own Level Zero driver.
	// Known only when the adapters were enumerated with details.
	ComputeOnly bool
	// PCIVendor is the physical adapter's PCI vendor id, always known: it
	// tells AMD's GPUs from its NPUs (package vendors).
	PCIVendor uint32
}

// kind is what a is for (vendors.Classify, as driverstore.Adapter.Kind).
func (a Adapter) kind() vendors.Kind {
	return vendors.Classify(a.PCIVendor, a.Vendor, a.ComputeOnly, false)
}

// rocmGPU reports an adapter ROCm can drive through librocdxg: an AMD GPU
// (not its Ryzen AI NPU) with graphics.
func (a Adapter) rocmGPU() bool {
	return a.Vendor == driverstore.AMD && !a.ComputeOnly && a.kind() == vendors.GPU
}

// FromInventory converts driverstore adapters.
func FromInventory(as []driverstore.Adapter) []Adapter {
	out := make([]Adapter, len(as))
	for i, a := range as {
		out[i] = Adapter{Index: a.Index, Vendor: a.Vendor, Description: a.Description, ComputeOnly: a.Type.ComputeOnly(), PCIVendor: a.PCI.Vendor}
	}
	return out
}

func (a Adapter) String() string {
	if a.Description != "" {
		return fmt.Sprintf("adapter %d (%s)", a.Index, a.Description)
	}
	return fmt.Sprintf("adapter %d (%s)", a.Index, a.Vendor)
}

// Input is everything Plan depends on.
type Input struct {
	// Host is every adapter of the host, in enumeration order.
	Host []Adapter
	// Selected is what the request selects, in host order.
	Selected []Adapter
	// All says the request asked for every adapter: selection variables
	// are then left unset, so each stack keeps its own default.
	All  bool
	Caps capability.Set
	// Probe is what the Probe functions found; parts Needs did not ask
	// for may be zero.
	Probe Host
}

// Needs says which host probes a request needs.
func Needs(selected []Adapter, caps capability.Set) (rocm, dri, wslg bool) {
	for _, a := range selected {
		rocm = rocm || a.rocmGPU()
	}
	return rocm, caps.Has(capability.Video), caps.Has(capability.Display)
}

// Plan computes the edits. It does no I/O.
func Plan(in Input) edits.Stack {
	var e edits.Stack
	if rocm, _, _ := Needs(in.Selected, in.Caps); rocm {
		e.Add(ROCmEdits(in.Probe.ROCm))
	}
	if !in.All {
		e.Env = append(e.Env, intelEnv(in.Host, in.Selected)...)
		if in.Caps.Has(capability.Graphics) || in.Caps.Has(capability.Video) {
			v, note := mesaEnv(in.Host, in.Selected)
			e.Env = append(e.Env, v...)
			e.Notes = append(e.Notes, note...)
		}
	}
	if in.Caps.Has(capability.Video) {
		e.Add(VideoEdits(in.Probe.DRI))
	}
	if in.Caps.Has(capability.Display) {
		e.Add(DisplayEdits(in.Probe.WSLg))
	}
	return e
}

// PlanSelected is Plan for the adapters selected of host's (both as
// driverstore lists them), in's Host and Selected aside: the one place
// that keeps the usable adapters, then plans their stacks. Adapters
// without a usable folder get nothing: their stack could not load anyway.
func PlanSelected(host, selected []driverstore.Adapter, in Input) edits.Stack {
	var usable []driverstore.Adapter
	for _, a := range selected {
		if a.Err == nil {
			usable = append(usable, a)
		}
	}
	in.Host, in.Selected = FromInventory(host), FromInventory(usable)
	return Plan(in)
}

// ROCmEdits is what every AMD GPU needs for ROCm: librocdxg, dids.conf and
// the variable that makes the HSA runtime load it.
func ROCmEdits(r ROCm) edits.Stack {
	var e edits.Stack
	if r.Lib == "" {
		e.Notes = append(e.Notes, r.missing("an AMD adapter is selected"))
		return e
	}
	e.Mounts = append(e.Mounts,
		edits.Mount{Source: r.Lib, Target: ContainerRocdxg, File: true},
		edits.Mount{Source: r.Lib, Target: ContainerRocdxgDev, File: true})
	if r.Share != "" {
		e.Mounts = append(e.Mounts, edits.Mount{Source: r.Share, Target: ContainerRocdxgShare})
	} else {
		e.Notes = append(e.Notes, fmt.Sprintf("no %s on the host: librocdxg runs with its built-in device table", path.Join(r.Dir, "share/rocdxg/dids.conf")))
	}
	e.Ldcache = append(e.Ldcache, ldcache.Entry{Key: rocdxgSoname, Path: ContainerRocdxg, Flags: ldcache.FlagNative})
	e.Env = append(e.Env, edits.Var{Name: "HSA_ENABLE_DXG_DETECTION", Value: "1", Why: "the HSA runtime loads librocdxg only when it is set"})
	return e
}

// gpus returns the adapters of vendor v that are GPUs, in host order.
func gpus(as []Adapter, v driverstore.Vendor) []Adapter {
	var out []Adapter
	for _, a := range as {
		if a.Vendor == v && a.kind() == vendors.GPU {
			out = append(out, a)
		}
	}
	return out
}

// intelEnv narrows Level Zero to the selected Intel GPUs, numbered as the
// Intel driver numbers them: the Intel GPUs in host order. Nothing when the
// selection holds every Intel GPU or none.
func intelEnv(host, selected []Adapter) []edits.Var {
	hostGPUs, sel := gpus(host, driverstore.Intel), gpus(selected, driverstore.Intel)
	if len(sel) == 0 || len(sel) == len(hostGPUs) {
		return nil
	}
	var idx []string
	for i, h := range hostGPUs {
		for _, s := range sel {
			if s.Index == h.Index {
				idx = append(idx, strconv.Itoa(i))
			}
		}
	}
	return []edits.Var{{Name: "ZE_AFFINITY_MASK", Value: strings.Join(idx, ","), Why: "Level Zero uses only the selected Intel GPUs (a convenience, not isolation)"}}
}

// mesaEnv points Mesa's D3D12 drivers at the first selected GPU. Mesa takes
// the first adapter whose description contains the value, so a description
// another adapter's also contains would pick the wrong one: then nothing is
// set and a note says why.
func mesaEnv(host, selected []Adapter) ([]edits.Var, []string) {
	var first *Adapter
	for i := range selected {
		if !selected[i].ComputeOnly {
			first = &selected[i]
			break
		}
	}
	if first == nil {
		return nil, []string{"graphics/video: no selected adapter can render (all are compute-only): MESA_D3D12_DEFAULT_ADAPTER_NAME not set"}
	}
	if first.Description == "" {
		return nil, []string{fmt.Sprintf("graphics/video: the host gave no description for %s: MESA_D3D12_DEFAULT_ADAPTER_NAME not set, Mesa uses its default adapter", first)}
	}
	for _, h := range host {
		if h.Index != first.Index && strings.Contains(h.Description, first.Description) {
			return nil, []string{fmt.Sprintf("graphics/video: %s and adapter %d have descriptions Mesa cannot tell apart: MESA_D3D12_DEFAULT_ADAPTER_NAME not set", first, h.Index)}
		}
	}
	return []edits.Var{{Name: "MESA_D3D12_DEFAULT_ADAPTER_NAME", Value: first.Description, Why: "Mesa's d3d12 GL, dzn Vulkan and d3d12 VA-API drivers render on this adapter"}}, nil
}

// AdapterEnv is the selection variables of a device that stands for one
// adapter a (a CDI device "1" or "intel:0"): what Plan sets when a request
// selects a alone and asks for graphics. A CDI device cannot see which
// other devices and capabilities a container asks for, so it carries them
// whatever the capabilities; they only steer a choice, never grant one.
func AdapterEnv(host []Adapter, a Adapter) []edits.Var {
	sel := []Adapter{a}
	out := intelEnv(host, sel)
	// With one adapter that renders there is nothing to choose.
	if !a.ComputeOnly && renderers(host) > 1 {
		v, _ := mesaEnv(host, sel)
		out = append(out, v...)
	}
	return out
}

// renderers counts the adapters that can render.
func renderers(as []Adapter) int {
	n := 0
	for _, a := range as {
		if !a.ComputeOnly {
			n++
		}
	}
	return n
}

// VideoEdits is what VA-API on D3D12 needs: the variable and /dev/dri.
func VideoEdits(dri []Node) edits.Stack {
	e := edits.Stack{Env: []edits.Var{{Name: "LIBVA_DRIVER_NAME", Value: "d3d12", Why: "VA-API loads Mesa's d3d12 video driver"}}}
	if len(dri) == 0 {
		e.Notes = append(e.Notes, "video: the host has no /dev/dri card or render node (WSL creates them when the Windows GPU driver supports video): VA-API will find no device")
		return e
	}
	for _, n := range dri {
		e.Devices = append(e.Devices, edits.Device{Path: path.Join(ContainerDRIDir, n.Name), Node: devnode.Node{Path: n.HostPath, Major: n.Major, Minor: n.Minor}, Access: edits.AccessStack})
	}
	return e
}

// DisplayEdits is WSLg's sockets and the variables that point clients at
// them, for whichever of X11, Wayland and PulseAudio the host has.
func DisplayEdits(w WSLg) edits.Stack {
	var e edits.Stack
	if w.X11 == "" && w.RuntimeDir == "" && w.Pulse == "" {
		e.Notes = append(e.Notes, fmt.Sprintf("display: WSLg is not running (no sockets under %s): it needs Windows 11 or wsl --update, and guiApplications=true in .wslconfig", w.Dir))
		return e
	}
	if w.X11 != "" {
		e.Mounts = append(e.Mounts, edits.Mount{Source: w.X11, Target: ContainerX11Dir})
		if w.Display >= 0 {
			e.Env = append(e.Env, edits.Var{Name: "DISPLAY", Value: ":" + strconv.Itoa(w.Display), Why: "X11 clients connect to WSLg's X server"})
		}
	}
	if w.RuntimeDir != "" {
		e.Mounts = append(e.Mounts, edits.Mount{Source: w.RuntimeDir, Target: ContainerWSLgRuntime})
		e.Env = append(e.Env, edits.Var{Name: "XDG_RUNTIME_DIR", Value: ContainerWSLgRuntime, Why: "Wayland and PulseAudio clients find their sockets there"})
		if w.Wayland != "" {
			e.Env = append(e.Env, edits.Var{Name: "WAYLAND_DISPLAY", Value: w.Wayland, Why: "Wayland clients connect to WSLg's compositor"})
		}
	}
	if w.Pulse != "" {
		e.Mounts = append(e.Mounts, edits.Mount{Source: w.Pulse, Target: ContainerPulse, File: true})
		e.Env = append(e.Env, edits.Var{Name: "PULSE_SERVER", Value: "unix:" + ContainerPulse, Why: "PulseAudio clients play and record through WSLg"})
	}
	return e
}
