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
// GPUs (adapterid.NPU: Intel's AI Boost NPU, Qualcomm's Hexagon NPU) go under their
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
// A device ID is the adapter's identity (package adapterid), the same
// name the DRA driver gives the device, the metrics' gpu label and `info`'s
// ID column: what stays with the hardware across WSL boots (a new LUID)
// and driver updates (a new folder hash), e.g. nvidia-2520-3a5c17aa-0 or,
// on Windows on Arm, qualcomm-36334330-00000000-0. With Replicas n
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
