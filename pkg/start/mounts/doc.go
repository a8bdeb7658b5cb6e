// Package mounts carries out the changes a GPU container needs inside its
// root filesystem.
//
// A Step is pure data (a device node, a read-only bind mount, a file, the
// loader cache, a symlink) that can be printed, diffed and golden-tested;
// package edits renders a container's steps from what it gets. Apply
// performs them, and is the only part that touches the system.
//
// Every path inside the rootfs is hostile: the image may hold symlinks
// anywhere, and may swap them while the hook runs. Apply therefore resolves
// every container path through a handle opened confined to the rootfs
// (openat2 RESOLVE_IN_ROOT; see inroot_linux.go for why not pathrs-lite), works
// on file descriptors from then on (mknodat, symlinkat, renameat, move_mount
// onto an O_PATH handle), and never follows a link out of the rootfs, so no
// image can make it create, change or mount anything on the host.
//
// Targets that already exist are handled deliberately (the "file exists"
// failures NVIDIA's users hit): a mount point that is a file or a symlink is
// replaced by a directory; a /dev/dxg of the wrong kind is replaced by the
// right node; an image's own /usr/bin/nvidia-smi is left alone.
//
// A failing Apply undoes what it did before returning: mounts are detached
// and files it wrote are restored, so a container never half-works. Files
// are written through package atomicfile, so an Apply killed at any point
// (an OOM kill, a runtime's timeout) leaves nothing that makes the next
// start of the container fail. Its
// error is an *Error whose fields (Kind, Op, Source, Target, Errno) say what
// failed; Advise adds what the user should do, chosen from those fields.
package mounts
