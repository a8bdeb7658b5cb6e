// Package dra decides what the Dynamic Resource Allocation driver for WSL
// GPUs (driver gpu.wsl-gpu-hook.dev, resource.k8s.io/v1) publishes and
// what preparing a claim means, as functions over an adapter inventory and
// a checkpoint: no gRPC, no API client. Package dra/driver wires it to the
// kubelet plugin library; cmd/wsl-gpu-dra-driver runs it.
//
// # Devices
//
// One pool per node (named after the node), one device per adapter the
// host lists, software adapters included (attribute software: the shipped
// DeviceClasses leave them out). A device's name stays with the hardware:
// <vendor>-<pci device>-<subsystem><subvendor>-<n>, n counting identical
// adapters in host order, so neither a WSL boot (new LUIDs) nor a driver
// update (new folder hash) renames it. Attributes, in the driver's domain:
// vendor, index (as `wsl-gpu-hook info` prints it), luid (one boot),
// description, driverVersion (Windows' a.b.c.d), driverStoreFolder,
// wddmVersion (a semantic version: 3.1.0), computeOnly (MCDM), software,
// pciVendor, pciDevice, and integrated (what hybrid laptops say, else
// whether the adapter owns less than 512 MiB, an integrated GPU's
// carve-out; absent for a software adapter). Windows on Arm reports ACPI
// ids in the PCI fields: pciVendor and pciDevice then carry all eight hex
// digits (4d4f4351, "QCOM"; the device name too) and acpiID the id they
// spell (QCOM0C36), the one Windows' Device Manager shows; a Qualcomm
// Hexagon NPU is vendor qualcomm with computeOnly true. Capacity memory is
// the dedicated video memory and, for an adapter that owns less than 512
// MiB, that plus the system memory Windows budgets it; 0 when the host
// gives none.
//
// # Sharing
//
// With Sharing on (a step of memory, a default), a device with room for
// two steps allows multiple allocations and publishes a request policy on
// memory (consumable capacity): each claim consumes a multiple of the
// step, the default when it asks nothing, and the scheduler keeps their
// sum within the capacity (rounded down to a step, so that asking for
// all of it, to have the adapter alone, is valid). Nothing on the node
// enforces the amount: Windows has no per-process limit /dev/dxg could
// set. Promises and Promised say what prepared claims were promised, per
// claim and per adapter, for metrics to set beside what they use.
//
// Two pods that reference one ResourceClaim share its devices too: the
// kubelet prepares the claim once. On WSL this is time-slicing by the
// Windows GPU scheduler, not isolation: /dev/dxg shows every adapter to
// whoever opens it. A claim with admin access (monitoring) may be
// prepared on a device other claims hold.

// # Health
//
// Track keeps every device it has seen. An adapter the host no longer
// lists stays published, not present, and one whose driver store folder
// is gone is present but unusable: both carry the NoSchedule taint
// gpu.wsl-gpu-hook.dev/unavailable with the reason as its value, so the
// scheduler allocates them to no new claim, and preparing a claim already
// allocated to one fails with the one line Problem holds. A device that
// returns loses its taint.
//
// # Prepare
//
// Each claim gets a transient CDI spec of kind gpu.wsl-gpu-hook.dev/claim
// (file SpecFile(uid) in the CDI dir, one device <uid>-<device> per
// allocated device, never reused) built like the project's own specs:
// /dev/dxg, the lib dir, the createContainer hook and one selection
// variable per device naming its adapter by LUID. It names no driver
// store folder, so a driver update while a pod runs leaves it valid. A
// device already prepared for another claim is refused unless both have
// a share of it or one has admin access.
//
// What the container got reaches it two ways: each request's metadata
// file (KEP-5304's format, metadata.resource.k8s.io/v1beta1: the devices'
// attributes plus the memory promised and the share), which the driver
// writes in its MetadataDir and the spec mounts read-only where the pod
// looks for it; and, for a claim with one device, WSL_GPU_DRA_* variables
// (device, request, LUID, index, description, memory). The kubelet
// plugin library's own metadata writer is not used: its files would be a
// second spec and a file outside the checkpoint, which neither the
// rewrite of lost files nor the uninstall would know.
//
// Unprepare removes the claim's spec and metadata files and nothing else.
// A stop removes nothing: pods holding claims keep running and their
// containers' next starts need the files. RemoveAll, for an uninstall,
// removes every claim spec, the metadata dir, the checkpoint and its
// moved-aside copies.

// # Checkpoint
//
// The checkpoint remembers prepared claims across restarts: the kubelet
// asks a restarted driver to prepare a claim again (it must answer the
// same) and to unprepare claims whose objects are gone. It records each
// claim's spec and metadata files as prepare wrote them and each device's
// share and memory (version 3; version 2 had the spec only): the spec's
// vendor variables depend on the host's other adapters, so only the
// checkpoint can say what a running pod was given, and the driver
// rewrites from it a file that went missing. A version 1 checkpoint,
// which recorded no spec, is read: each claim gets the spec its file
// holds when that is the claim's, else the selection a version 1 prepare
// wrote.
//
// Its checksum, a SHA-256 over the claims' encoding, tells a file the
// driver wrote from one that was cut (a full disk, a crash under a
// non-atomic copy), half-restored from a backup, or edited by hand. It is
// no security boundary: whoever can write the file (root on the node) can
// also write a matching checksum, or the CDI specs themselves.
//
// A checkpoint that fails the checksum, does not decode, names another
// driver or version, or holds an entry prepare would never write is
// corrupt: never partly trusted, and never overwritten. The driver renames
// it to checkpoint.json.corrupt-<UTC time> (keeping the newest three),
// says where in one line, and starts with no claims. A checkpoint that
// cannot be read (EACCES, EIO, EMFILE) may be intact: it is kept as it is
// and read again with backoff; a start that cannot read it within its
// bound fails in one line, and the kubelet restarts the driver.
//
// # Parameters
//
// The driver takes no parameters. A claim whose allocation carries an
// opaque config for gpu.wsl-gpu-hook.dev, from the claim or from its
// DeviceClass, fails to prepare with one line saying so (the kubelet
// shows it in the pod's events), rather than being prepared as if the
// config were not there. Opaque configs for other drivers are theirs, and
// ignored, as the API says.
package dra
