// Command pivotroot runs a command with another Debian release's tree as
// its root file system, so that release's container engines run on this
// host. It is a test tool and is never shipped.
//
//	pivotroot --root DIR --scratch DIR [--bind PATH]... [--cgroup2] -- CMD ARGS...
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
// Run it under dxgsim (dxgsim ... -- pivotroot ...): the seccomp filter is
// inherited across exec and namespaces, so the engines inside stay
// simulated.
package main
