// Package hookroot finds the container's root filesystem for a hook that
// is not told where it is, and proves it is the container's before the
// hook writes a byte there.
//
// A CDI device's createContainer hook reads no config.json (a container's
// own user namespace may not read it). runc changes into the root
// filesystem right before it runs the createContainer hooks
// (libcontainer/rootfs_linux.go, prepareRootfs), so the hook's working
// directory is it; crun names it in the state ("root"). Other runtimes do
// neither as reliably: youki runs createContainer hooks before it prepares
// the root, a runtime may spell the bundle through a symlink (/var/run ->
// /run) and run the hook in it, and crun's "root" under podman --rootfs /
// is the host's own root. A hook that took such a directory would write
// the loader files and nvidia-smi into the host and bind folders there.
//
// So a directory is taken only when it is a container's root filesystem
// as runc and crun prepare one: in the container's mount namespace, both
// bind it onto itself before the createContainer hooks run, so it is
// the root of a mount (statx STATX_ATTR_MOUNT_ROOT, Linux 5.8); it is not
// the bundle, nor the host's root / (compared by device and inode, never
// by spelling); and the hook is not in the host's mount namespace. The
// last rule compares the hook's mount namespace with that of pid 1 in
// /proc. Before pivot_root, /proc is still the one the runtime sees (the
// container's own is mounted under the root filesystem, not over /proc),
// so although the hook runs in the container's pid namespace, /proc/1 is
// the init of the host the engine runs on. A hook in a user namespace of
// its own (the container's, or a rootless engine's) may not look at pid
// 1's namespaces (EACCES); the other rules then decide alone. The
// directory is opened once, and the hook works through that descriptor
// from then on, never through its path again.
//
// Otherwise the hook refuses with one line that says what the runtime did
// and what to do, having changed nothing. Check is the decision, from
// facts a test can make up; Open gathers them. The open replaces the one
// the steps made by path before; the proof adds a statx and four stats,
// 7 to 11 µs on the build machines (BenchmarkOpen here, BenchmarkReadInputCDI
// in cmd/wsl-gpu-hook), most of it the two namespace lookups in /proc,
// against the ~50 ms of a container start.
package hookroot
