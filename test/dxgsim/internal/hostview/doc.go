// Package hostview makes a simulated WSL host tree appear at the real
// paths (/usr/lib/wsl, /dev/dxg) for one command tree, without changing
// the machine it runs on.
//
// It works only inside a mount namespace of its own: the caller (dxgsim's
// shim) is started in a new mount namespace (CLONE_NEWNS, no user
// namespace: it must be real root) and calls Setup before exec. Where a mountpoint does not exist on the host
// (/usr/lib/wsl, /dev/dxg normally do not), the parent directory is
// overlaid: a tmpfs holds the overlay's upper and work directories, the
// original directory is the lower layer, and the mounts that were below it
// (/dev/pts, /dev/shm, ...) are bound again on top, so the command sees the
// host's /dev and /usr/lib plus the simulated entries. All of it lives in
// the namespace and disappears with its last process; nothing is written
// to the host's file systems.
package hostview
