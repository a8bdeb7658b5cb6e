// Command pivotroot runs a command with another Debian release's tree as
// its root file system, so that release's container engines run on this
// host. It is a test tool and is never shipped.
//
//	pivotroot --root DIR[:DIR]... --scratch DIR [--bind PATH|SRC:DST]... [--cgroup2] [--tmpfs-upper] [--private-tmp] [--read-only] -- CMD ARGS...
//
// In a private mount namespace it mounts an overlay whose lower layer is
// DIR (a cached root, never written) and whose upper layer lives in
// --scratch, shows the host's /dev (with a simulated /dev/dxg), /sys,
// /usr/lib/wsl, /tmp and each --bind PATH at the same paths inside, a fresh
// /proc and a tmpfs on /run, then pivot_root(2)s into it and execs CMD.
// pivot_root, not chroot: an OCI hook that enters a container's mount
// namespace gets that namespace's root, which under chroot would still be
// the host's. --cgroup2 replaces /sys/fs/cgroup with a cgroup2 mount (the
// unified hierarchy alone), for runtimes that refuse a hybrid layout.
//
// The simulated Docker Desktop (test/engines) uses the rest: --root
// LAYER:DIR stacks a small layer of its own over the cached root,
// --tmpfs-upper keeps what the engine writes to its root in a tmpfs that
// dies with it (Docker Desktop's root is reset at every start),
// --private-tmp hides the host's /tmp, --read-only makes the root itself
// read-only as LinuxKit's is (the mounts on it stay writable), and --bind
// SRC:DST shows its data disk at /var/lib/docker.
//
// Run it under dxgsim (dxgsim ... -- pivotroot ...): the seccomp filter is
// inherited across exec and namespaces, so the engines inside stay
// simulated.
package main
