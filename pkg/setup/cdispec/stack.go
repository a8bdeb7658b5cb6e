package cdispec

import (
	cdi "tags.cncf.io/container-device-interface/specs-go"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/driverstore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/cdiselect"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/edits"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/vendorstack"
)

// Capability devices of our kind, next to the adapter devices: a container
// asks for `--device wsl-gpu-hook.dev/gpu=all --device
// wsl-gpu-hook.dev/gpu=video`. Their edits are static (host paths that do
// not change with a driver update), so they carry no selection variable.
const (
	VideoDevice   = "video"
	DisplayDevice = "display"
)

// stackFor is what the stacks of the adapters a device
// selects need (package vendorstack): librocdxg and HSA_ENABLE_DXG_DETECTION
// when it selects an AMD GPU and the host has librocdxg; the selection
// variables (ZE_AFFINITY_MASK, MESA_D3D12_DEFAULT_ADAPTER_NAME) when it
// stands for exactly one adapter. A device cannot see the other devices a
// container asks for, so those variables come whatever the capabilities:
// they only steer a choice, never grant one.
func stackFor(inv *driverstore.Inventory, sel cdiselect.Selection, stack vendorstack.Host) edits.Stack {
	picked, err := cdiselect.Union{Selections: []cdiselect.Selection{sel}}.Select(inv.Adapters)
	if err != nil {
		return edits.Stack{}
	}
	host := vendorstack.FromInventory(inv.Adapters)
	mine := vendorstack.FromInventory(picked)
	var add edits.Stack
	if rocm, _, _ := vendorstack.Needs(mine, 0); rocm && stack.ROCm.Lib != "" {
		add = vendorstack.ROCmEdits(stack.ROCm)
	}
	if len(mine) == 1 && !sel.All {
		add.Env = append(add.Env, vendorstack.AdapterEnv(host, mine[0])...)
	}
	return add
}

// capabilityDevices are the video and display devices, when the host has
// what they give: /dev/dri nodes, WSLg's sockets. Without, asking for one
// fails at the engine as an unresolvable device, which is the truth: VA-API
// or a GUI could not work there.
func capabilityDevices(stack vendorstack.Host) []cdi.Device {
	var out []cdi.Device
	if video := vendorstack.VideoEdits(stack.DRI); len(video.Devices) > 0 {
		out = append(out, cdi.Device{Name: VideoDevice, ContainerEdits: cdiEdits(video)})
	}
	if display := vendorstack.DisplayEdits(stack.WSLg); !display.Empty() {
		out = append(out, cdi.Device{Name: DisplayDevice, ContainerEdits: cdiEdits(display)})
	}
	return out
}

func cdiEdits(s edits.Stack) cdi.ContainerEdits {
	var e edits.Edits
	e.AddStack(s, false)
	return e.CDI()
}
