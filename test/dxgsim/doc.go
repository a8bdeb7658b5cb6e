// Command dxgsim runs a command tree as if it were inside a WSL2 VM with a
// GPU: the /dev/dxg ioctls that adapter enumeration uses are answered by a
// simulated dxgkrnl driver and Windows host, described by a profile from
// test/simhost. It is a test tool and is never shipped with the hook.
//
//	dxgsim --profile NAME [--dev PATH] [--fault F]... [--report FILE] [--bind-host DIR] -- CMD ARGS...
//
// How: dxgsim re-executes itself as a shim that installs a seccomp filter
// (SECCOMP_RET_USER_NOTIF for ioctl calls whose request is one of the five
// dxg numbers) and then execs CMD. The filter is inherited by every
// descendant, through dockerd, containerd, runc, the shims and the
// container processes. dxgsim's supervisor receives each notification,
// checks that the fd is the simulated node (a character device 10:229, the
// numbers of /dev/fuse, which opens harmlessly and is not in the container
// runtimes' default device allow-list), reads and writes the caller's
// memory, and answers. Every other system call, and a dxg request number on
// any other fd, runs unchanged in the kernel, so the binaries under test run
// unmodified.
//
// --dev PATH creates the node at PATH and removes it on exit; a stale
// simulated node there is replaced, any other file is refused. --bind-host
// DIR runs CMD in a private mount namespace where DIR/usr/lib/wsl appears
// read-only at /usr/lib/wsl and a node at /dev/dxg, leaving the host
// untouched (the mountpoints come from overlays whose upper layers live in
// the namespace's tmpfs). With --bind-host, --dev is optional: given, the
// node is also made at PATH on the host.
//
// Faults (--fault, repeatable): old-kernel (ENUMADAPTERS3 is ENOTTY),
// query-fail=N (every QUERYADAPTERINFO on adapter N fails: host
// DEVICE_REMOVED, ENODEV), missing-folder=N (adapter N's driver store path
// names a folder that does not exist: same inf, another hash), zero-adapters
// (the host reports none), denied (node mode 0600 and CMD runs as
// 65534:65534, so open gets EACCES), ntstatus (failures come back as old
// 4.19-era drivers returned them: the raw negative NTSTATUS as the ioctl
// result), no-stats (LX_DXQUERYSTATISTICS is ENOTTY, as on kernels before
// it), no-stats-pid (a statistics query naming a pid fails with EINVAL, as
// on kernels without the pid lookup), stats-fail=N (adapter N's statistics
// queries fail with DEVICE_REMOVED while enumeration works),
// stats-backwards (engine running times shrink over time). N is the
// adapter's index in host order, compute-only adapters included (the
// ENUMADAPTERS3-with-compute-only order).
//
// Statistics: LX_DXQUERYSTATISTICS (adapter, segment, node and
// process-segment-group queries), LX_DXQUERYVIDEOMEMORYINFO and the
// NODEMETADATA query are answered from the profile's workload model
// (test/simhost WorkloadFor): engine busy fractions and per-process memory
// that move over time by a clock, so readers can be checked for the
// percentages and bytes the model sets. Per-process figures go to the
// process whose command name the model names (simhost.WorkerComm).
//
// --folder N=NAME makes adapter N report another driver store folder (a
// driver update); --folder-file FILE does the same from lines N=NAME
// re-read at every query, for an update while CMD runs. --removed-file
// FILE hides the adapters whose indexes it lists (one a line) from every
// enumeration while they are listed: an adapter removed while CMD runs.
// --luid-file FILE gives adapters the LUIDs its lines N=0xHEX name, at
// every enumeration and LUID lookup: a WSL reboot under CMD (same
// adapters, new LUIDs). Statistics name a process by the pid it has in its
// own pid namespace, as dxgkrnl records it, so a container's process is
// asked for by its in-container pid.
//
// Misuse the real driver punishes silently is reported: an ENUMADAPTERS3
// fill with a capacity below the adapter count, and adapter handles a
// process still holds, with the device still open, when dxgsim stops (a
// long-lived process that never closes them piles them up). Handles a
// process leaves to its files are not misuse: the driver frees a process's
// handles when its last /dev/dxg file is released, by close or by exit,
// and dxgsim counts them as released.
// Each prints one "dxgsim: misuse: ..." line on stderr at exit and turns a
// successful exit into exit status 3. --report FILE writes a JSON summary.
// --host-latency D delays every call WSL's driver forwards to the Windows
// host over the VM bus (QUERYADAPTERINFO) by D, so that benchmarks see the
// start cost as WSL shapes it (hack/benchstart passes its figure and says
// where it comes from). A process's first open of /dev/dxg also makes the
// driver's process object on the host, and the release of its last dxg
// file destroys it: dxgsim charges D at the process's first call (it sees
// no open) and counts both (processesCreated, processesDestroyed in the
// report).
// dxgsim otherwise exits with CMD's status (128+N when CMD was killed by
// signal N), 125 when it could not set up, 126/127 when CMD cannot be run.
//
// What is emulated: ENUMADAPTERS2 and ENUMADAPTERS3 (count queries,
// EOVERFLOW, capacity limits, compute-only filtering, a new handle per
// adapter per enumeration), CLOSEADAPTER, OPENADAPTERFROMLUID and
// QUERYADAPTERINFO for DRIVERVERSION, ADAPTERTYPE(_RENDER), UMD and KMD
// driver versions, PHYSICALADAPTERCOUNT, PHYSICALADAPTERDEVICEIDS,
// ADAPTERADDRESS, DRIVER_DESCRIPTION and QUERYREGISTRY's driver store path;
// per-process handle tables; NTSTATUS to errno translation.
//
// What is not: any GPU work (devices, allocations, contexts, sync objects,
// submissions), every other D3DKMT ioctl (they reach /dev/fuse's driver
// and fail with its errors), display, the 32-bit compat ioctl path, and the
// driver's ENOTTY for an fd opened by another process (dxgsim does not see
// open or close, so it cannot know who opened an fd). For the same reason
// it frees the handles of a process that closed its last /dev/dxg fd only
// when the process exits or dxgsim stops, not at the close: until then they
// still answer queries and count against the process's limit of 65536,
// where the driver would already have freed them. Registry values other
// than the driver store path report status FAIL.
package main
