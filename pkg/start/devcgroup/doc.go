// Package devcgroup lets a container that has just been created open one more
// device node, /dev/dxg, by widening its device cgroup.
//
// It is meant for an OCI prestart/createRuntime hook: the hook runs as root in
// the runtime's (host) namespaces, after the runtime applied the container's
// cgroup device rules and before the container's process runs. The container
// is found through its init process's host pid.
//
// # Model
//
// Device access is decided in up to two places, and [Allow] handles both:
//
//   - cgroup v1 (the devices controller, WSL2's older layout and the hybrid
//     layout): the container's devices cgroup keeps a list the kernel
//     consults on open and mknod. Appending "c MAJOR:MINOR rwm" to its
//     devices.allow widens it; nothing else changes.
//   - cgroup v2: BPF_CGROUP_DEVICE programs attached to the container's
//     cgroup decide, and every attached program must allow an access. A
//     second, allowing program therefore cannot widen anything: the
//     existing program is replaced by one generated from the complete rule
//     list: the bundle's linux.resources.devices, then the devices runc
//     always allows (/dev/null, zero, full, random, urandom, tty, ptmx,
//     pts/*, net/tun and mknod of any node; crun also allows /dev/console),
//     then the new rule. The program is the one runc's cgroups library
//     generates for those rules, instruction for instruction (tests hold
//     it to the library's), but written here: the library's package would
//     link cilium/ebpf, godbus, net and crypto into every start. It is
//     named wsl_gpu_hook (`bpftool cgroup tree` shows it) and replaces the
//     old one as runc does: BPF_F_REPLACE for one old program, attach then
//     detach for several. If no program is attached, nothing restricts
//     devices there and nothing is done.
//
// A pid that has neither a v1 devices cgroup nor a device program on its v2
// cgroup is not restricted at all; Allow then changes nothing and returns nil.
// So does a v2 cgroup whose hierarchy is not mounted in the caller's mount
// namespace, as no program can have been attached through it.
//
// # Limits
//
// The added rule lives only in the kernel. `runc update` regenerates the
// rules from the runtime's own configuration, and with the systemd cgroup
// driver `systemctl daemon-reload` makes systemd rewrite them too: both drop
// the rule again (NVIDIA/nvidia-container-toolkit#48). Putting /dev/dxg into
// the spec instead (linux.devices plus linux.resources.devices), as the
// runtime wrapper and CDI paths do, survives both; prefer them where possible.
//
// The v2 path reproduces runc's rules, not systemd's: a device program
// attached by another manager is replaced by runc's view of the container.
// Programs on ancestor cgroups are never touched; if one of them denies the
// device, Allow cannot help.
//
// Directories are opened with openat2 (Linux 5.6, older than any WSL2
// kernel in use). A rule set runc itself refuses (one that takes access
// away from part of a wildcard rule) is refused here too.
//
// # What it never does
//
// It never writes to any cgroup but the one the pid is in, never removes a
// rule, never detaches a program it did not replace, never follows a symlink
// or crosses a mount inside a cgroup file system, and never runs without
// finding the cgroup through /proc: a path from /proc/<pid>/cgroup that lies
// outside the caller's cgroup namespace is an error, not a guess.
package devcgroup
