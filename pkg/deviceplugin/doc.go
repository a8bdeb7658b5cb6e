// Package deviceplugin decides what the kubelet device plugin advertises and
// what it answers, as pure functions over an adapter inventory: no gRPC, no
// kubelet types, no I/O beyond what the caller passes in. The server in
// package deviceplugin/server wires it to the kubelet; `wsl-gpu-ctl info
// --k8s` prints the same decisions, so an operator sees resource names and
// device IDs before deploying.
//
// # Model
//
// One resource per vendor present (nvidia.com/gpu, amd.com/gpu,
// gpu.intel.com/dxg, qualcomm.com/gpu, wsl-gpu-hook.dev/dxg for Microsoft
// and unknown vendors), one device per adapter, optionally Replicas
// devices per adapter for sharing. Compute-only accelerators that are not
// GPUs (IsNPU: Intel's AI Boost NPU, Qualcomm's Hexagon NPU) go under their
// own resource, wsl-gpu-hook.dev/npu, never under a GPU's; NVIDIA and AMD
// compute-only adapters stay GPUs.
// Software adapters (WARP) are never advertised: they are not GPUs. Names,
// replicas and CDI come from the [device_plugin] table of the hook's
// config.toml (OptionsFrom), so the plugin and the hook agree.
//
// Features writes the node-feature-discovery feature file (presence,
// adapter and per-vendor counts, lowest WDDM version, compute-only).
//
// # Device IDs
//
// Windows gives adapters a new LUID every boot, and the enumeration index
// follows the host's order, so neither names a GPU for long. A device ID is
// built from what stays with the hardware and its driver:
//
//	<vendor>-<pci vendor>-<pci device>-<subsystem><subvendor>-<inf>-<ordinal>
//	nvidia-10de-2520-3a5c17aa-nvltwi.inf_amd64-0
//	qualcomm-4d4f4351-36334330-00000000-qcdxkmsuc8380.inf_arm64-0
//
// (Windows on Arm reports ACPI ids, "QCOM" and "0C36", in the PCI fields:
// they print whole.)
//
// <inf> is the driver store folder's name lowercased without the hash
// Windows appends (nvltwi.inf_amd64_7b2a5c1c4e6f8d90 -> nvltwi.inf_amd64),
// so a driver update keeps the ID; <ordinal> counts identical adapters (same
// everything before it) in host order. The IDs survive plugin restarts and
// WSL reboots; two identical GPUs may swap IDs if the host enumerates them
// in another order, which nothing in the VM can tell apart. With Replicas n
// > 1 each adapter yields IDs <id>::0 .. <id>::n-1.
//
// # Health
//
// Build keeps every device it has seen: an adapter the host no longer lists,
// or whose driver store folder is gone or refused, stays advertised as
// Unhealthy with the reason, so the kubelet lowers allocatable rather than
// forgetting the device; it turns Healthy again when it returns. An
// adapter carrying an error in the inventory is Unhealthy with it: the
// plugin's lister marks those whose statistics queries fail
// (gpustats.HealthCheck) before Build sees them.
//
// # Allocate
//
// The answer names the devices twice: as CDI names (CDIName: nvidia.com/gpu=<i>
// with i the index among NVIDIA adapters, amd.com/gpu=<i> likewise, and
// wsl-gpu-hook.dev/gpu=<adapter index> otherwise) for runtimes with CDI, and
// as the device node, read-only mounts of the lib dir and the selected
// adapters' current driver folders, and the request variable the hook reads
// (LUIDs), for runtimes without CDI. Sharing by replicas is time-slicing by
// the Windows GPU scheduler, not isolation: /dev/dxg shows every adapter to
// whoever opens it.
package deviceplugin
