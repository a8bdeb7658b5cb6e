// Package nstrust reads a file from inside a user namespace of a
// container's own only if nothing in that namespace can have written it.
//
// Why: a CDI hook of a container with a user namespace of its own (podman
// --userns=auto, rootless podman, Kubernetes pods with hostUsers: false)
// runs as the container's root, an unprivileged host uid. What the hook
// keeps of the host (the probe cache in /run/wsl-gpu-hook, the SONAMEs in
// /var/cache/wsl-gpu-hook) is written by hooks running as the host's root,
// and read elsewhere under the rule "a file of this user's that no one else
// may write". In the namespace that rule fails: the host's root shows as
// the overflow uid (65534), and the reader is uid 0 of the namespace, which
// is the container's root. Trusting a file of the namespace's uid 0 would
// trust the container. The file can be trusted on another ground instead:
// nothing in the namespace can have written it. The container's processes
// have not run yet when the hook does, but its image, its volumes and any
// earlier container with the same mapping may have written anywhere the
// namespace can write.
//
// What the kernel guarantees (privileged_wrt_inode_uidgid in
// kernel/capability.c, generic_permission and inode_owner_or_capable in
// fs): capabilities held in a user namespace apply only to inodes whose
// owner and group are both mapped in it. An inode whose owner is not
// mapped, a process of the namespace may write only as the mode's group or
// other class allows; it may not chmod, chown or set its times; from a
// sticky directory it may not remove or rename it. So a file whose owner
// is unmapped and whose mode gives group and others no write, reached from
// / through directories with the same property (or sticky ones), was
// written from outside the namespace, and nothing in the namespace can
// have replaced it or any directory on the way. That is what is trusted.
// Everything else is refused:
//
//   - a component (a directory on the way, the file) owned by a mapped uid:
//     the namespace could have written or replaced it;
//   - a file writable by group or others, a directory writable by group or
//     others without the sticky bit: a process of the namespace may be in
//     the group (supplementary groups brought in from outside show as the
//     overflow gid and still count), and others is everyone;
//   - a symbolic link anywhere on the path: the walk never follows one,
//     and a path to be read this way must have none;
//   - anything the walk cannot open or stat, or whose owner it cannot tell.
//
// The group plays no other part: with no group write bit the group grants
// no write, capabilities need the owner mapped as well, and only the owner
// may change the group or the mode. POSIX ACLs are covered by the mode: a
// named entry's write is bounded by the ACL mask, which is the mode's
// group class.
//
// Telling that an owner is unmapped. In the namespace stat shows every
// unmapped owner as the overflow uid (/proc/sys/kernel/overflowuid, 65534).
// When the namespace's uid map (/proc/self/uid_map) does not map 65534, an
// owner shown as 65534 is outside. But Kubernetes maps 65536 ids (0-65535)
// and podman maps the image's nobody: 65534 is mapped there, and a file of
// the namespace's own uid 65534 shows the same as one of the host's root.
// The kernel is then asked on a throwaway thread whose file system uid is
// 65534 (setfsuid, which also drops the capabilities that could override
// it): reopening a component with O_NOATIME is allowed to the inode's owner
// alone and is EPERM for anyone else, so EPERM proves the owner is not the
// namespace's 65534. The reopen goes through /proc/self/fd of the walked
// descriptor, so the inode asked about is the inode walked and checked.
//
// What is trusted that the host rule does not: inside the namespace root
// and any other host user look the same, so a file of a host user other
// than root passes too. Read this way only paths whose directories no host
// user but root owns (the defaults, under /run and /var/cache, are root's
// alone); the hooks that write them run as root and apply the host rule.
//
// Not for writing (a namespace cannot write where it would trust), nor for
// a process outside a user namespace of its own (Own is false there: use
// the owner check).
package nstrust
