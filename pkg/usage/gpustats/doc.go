// Package gpustats reads what the GPUs of a WSL2 host are doing, for every
// vendor, through the statistics calls of /dev/dxg (package dxcore): each
// adapter's memory (size and resident bytes per segment group), each engine
// node's busy ratio, and the memory each Linux process that holds /dev/dxg
// uses, with the container and pod its cgroup names. `wsl-gpu-ctl top`,
// the metrics endpoint, the device plugin's health check and the DRA
// driver's capacity all read through it.
//
// # Model
//
// A Sampler keeps one dxcore.Session (the device open, one handle per
// adapter) and the previous sample. It opens a new session when the
// adapters the kernel lists (their LUIDs, answered by the guest) differ
// from the session's, which a Windows driver update or an adapter change
// causes, and, at most every 30 s, after an adapter's statistics failed,
// so a long-lived reader (the metrics endpoint, the device plugin) follows
// the host without a restart. Sample asks, per adapter: ADAPTER
// (segment and node counts), SEGMENT per segment, NODE per engine node,
// the caller's own local budget (QUERYVIDEOMEMORYINFO), and per dxg process
// PROCESS_SEGMENT_GROUP for the local and non-local groups; node names and
// types (NODEMETADATA) and the driver version are asked once. Busy ratio is
// the growth of an engine's running time over the wall time between two
// samples, so the first sample has none, and a sample taken by one reader
// shortens the window of the next reader's. Long-lived readers that serve
// others (the metrics endpoint, the device plugin) therefore read through
// a Poller, which samples on its own period and hands every reader the
// latest sample: every scraper sees the ratio over the same period.
//
// # What the figures mean, and for which vendor
//
// The counters are kept by Windows' video memory manager and GPU
// scheduler (dxgkrnl on the host), not by the vendor's driver, so they
// mean the same for NVIDIA, AMD and Intel: Task Manager draws its GPU page
// from them. Trustworthy on all three: segment sizes and resident bytes,
// node running times (the scheduler's view: time a node had work queued
// and running, not the shader-core occupancy nvidia-smi calls utilization;
// on NVIDIA, CUDA work shows on the "Compute_0"/"Cuda" nodes), and
// per-process segment-group usage. Engine names come from the driver and
// differ by vendor ("Compute_0" on NVIDIA, "Compute" on Intel); the kind
// (3d, compute, copy, video_decode, video_encode, video_processing, other)
// is derived from the engine type plus, for type "other", the name.
// Unknown: clocks, temperature, power (PHYSICAL_ADAPTER statistics need
// driver support and are not read), and per-process engine time.
//
// # Attribution limits
//
// The kernel resolves a pid to a host process by the pid the process had in
// its own pid namespace when it opened /dev/dxg (task_pid_vnr), first
// match. A process in a container is therefore asked for by its in-container
// pid; two dxg processes with the same such pid (two containers' pid 1)
// cannot be told apart and are reported as ambiguous, not guessed. Kernels
// without the pid lookup answer EINVAL: processes are then listed without
// figures. Memory Windows applications use is in the adapter totals and in
// no process.
//
// # Which container a process is in
//
// A process's container id and pod UID come from its cgroup path, and
// only from the shapes engines and the kubelet make (ParseCgroup lists
// them): the outermost container on the path, never anything below a
// systemd service. A user's delegated subtree (user@UID.service:
// systemd --user, rootless podman) is named by the user, who could name
// a cgroup after another container's id and have its GPU memory
// reported under that pod's name; so processes there, a rootless
// engine's containers included, carry no id and are shown as plain
// processes (no name source asks a rootless engine anyway). A container
// that makes cgroups below its own stays its own container.
//
// # Finding the dxg processes
//
// DxgProcesses lists /proc/PID/fd of every process and reads each link,
// which procfs answers from the kernel's own records; only an fd named
// like the device (its base name, or "dxg" as in a container's /dev) is
// stat'ed, with AT_STATX_DONT_SYNC, and matched by device number. So no
// filesystem is asked anything: a process holding a file on a hung NFS,
// 9p or FUSE mount (/mnt/c on WSL) does not stall the scan. A node the
// container was given under another name is not found. The scan runs
// beside the sampler, never under its lock, one at a time; a sample waits
// for it at most 2 s and otherwise goes on with the previous scan's
// processes and a note saying so.
//
// # Safety
//
// Nothing here runs on the container start path (the hook never imports
// this package). Every reply is bounds-checked by dxcore; counters that go
// backwards or grow faster than wall time give a per-engine error line and
// a fresh baseline, never a negative or >100% figure. Process names are
// reported as the process set them: callers that show them pass them
// through package printable.
package gpustats
