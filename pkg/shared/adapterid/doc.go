// Package adapterid is an adapter's identity as every part of the project
// names it: the device plugin's device IDs, the DRA driver's device names,
// the node labels, `info`, `top` and the metrics' series all take it from
// [Of], and "is this a GPU" is decided once, by [KindOf].
//
// # Model
//
// Windows gives an adapter a new LUID at every boot of the WSL VM, its
// enumeration index follows the host's order, and a driver update renames
// its driver store folder: none of them names the hardware for long. An
// ID is built from what stays with the card:
//
//	<vendor>-<device>-<subsystem><subvendor>-<n>     nvidia-2520-3a5c17aa-0
//
// the PCI device id (8 hex digits when wider than 16 bits: Windows on Arm
// reports ACPI ids such as "0C36" as 0x36334330), the subsystem and its
// vendor, and n counting identical adapters before it in host order. It
// is a DNS label (at most 63 characters of [a-z0-9-]), so it can be a DRA
// device name, a label value and a Prometheus label alike. Two identical
// cards keep their IDs across a reboot as long as the host lists them in
// the same order, which it does (by bus location).
//
// Kind sorts adapters into what they are for: a GPU; an NPU (AMD's Ryzen
// AI NPUs, which carry AMD's own PCI id where its GPUs carry ATI's, and
// any compute-only accelerator that is not NVIDIA's or AMD's:
// their compute-only adapters are datacenter GPUs in compute mode, which
// CUDA and ROCm run on); or a software rasterizer (WARP), which is no GPU
// at all. Package vendors decides it (vendors.Classify) from the PCI
// vendor and the adapter's type, which enumeration asks only with
// dxcore.Options.Details; AMD's NPU it tells by the id alone.
package adapterid
