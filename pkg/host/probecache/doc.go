// Package probecache keeps what one container start learned of the host
// (the adapters, their driver store folders, nvidia-smi's place and the lib
// dir's loader-cache entries) in a file under /run, so the next start checks
// it with a few cheap calls instead of asking the Windows host again.
//
// On WSL each adapter query is a VM-bus message to the Windows host, and
// /usr/lib/wsl is a 9p mount of Windows folders where every lookup, open,
// read and close is a round trip to a file server on Windows. A start with
// a fresh cache reads in sysfs which devices the GPU driver is bound to
// (package dxgsysfs) and stats the lib dir and the drivers dir once each;
// nothing else of the probe reaches the host, and /dev/dxg is not opened
// (its first open and last close in a process each wait on the host). A
// cache made where that reading did not name every adapter is checked
// with the guest-side listing instead (ENUMADAPTERS3, which gives the
// LUIDs): one ioctl, and the open and close.
//
// A cached probe is used only when everything it depends on is unchanged:
//
//   - the boot (/proc/sys/kernel/random/boot_id): a cache from another boot
//     of the VM is never used, even where /run is not a tmpfs;
//   - the configured device, lib dir and drivers dir, and what was asked
//     (the adapters' details, the loader-cache entries);
//   - the adapters' LUIDs, in order, from the listing the guest answers: a
//     new or removed adapter changes them, and so does a new boot. Windows
//     normally gives an adapter a new LUID when it restarts it (a driver
//     update does), but this is not relied on alone;
//   - the devices the GPU driver is bound to in sysfs, names and inodes
//     (Key.Bound), which stand for the LUIDs: each adapter is a PCI device
//     and a VM-bus channel named by an instance GUID that holds its LUID.
//     A cache keeps a reading only if it named every adapter listed when
//     the cache was made; a different reading later is a miss;
//   - one stat of the lib dir and of the drivers dir: device, inode, mode,
//     modification and change times. A driver update adds a folder to the
//     driver store (FileRepository), which moves its modification time:
//     on WSL's 9p mount a stat is a GETATTR answered by the Windows file
//     server from NTFS, which updates a directory's last-write time when an
//     entry is created, removed or renamed in it, with 100 ns resolution.
//     A file added to, removed from or renamed over in the lib dir moves
//     the lib dir's. WSL's lib dir is an overlay over the 9p mount: there a
//     stat shows the upper dir, so a change of the Windows side alone is
//     seen through the drivers dir and the LUIDs (it comes with a driver
//     update) or the boot id (with a WSL update), not the lib dir's stamp.
//
// A driver rollback to a folder still in the store adds nothing to the
// store, and the host may keep the LUID; but Windows restarts the adapter
// to change its driver, and its VM-bus channel is offered again: a new
// sysfs entry (kernfs never soon reuses an inode number), so Bound
// differs. A change of the folder the host names with nothing the guest
// can see (no restart, no store change) is not seen without asking the
// host, which a warm start does not.
//
// A second file (Sonames, sonames.go) outlives the boot: the lib dir's
// SONAMEs, each with its file's FileID, so that the first start after a
// boot stats each library instead of reading its ELF headers.
//
// The file is a fixed sequence of little-endian fields (codec.go), not
// JSON: every warm start reads it, and encoding/json's reflection cost more
// than the rest of the cache check. A file that is not a regular file owned
// by this user, is writable by others, is larger than MaxSize, does not
// decode exactly, or holds anything a probe could not have produced is
// ignored and replaced, never trusted: the hook runs as root. Files are
// replaced atomically (pkg/shared/atomicfile), mode 0644: they hold nothing a user
// could not ask the host or read in /usr/lib/wsl, and a hook in a user
// namespace of its own must read them.
//
// User namespaces. A CDI hook of a container with a user namespace of its
// own runs as the container's root: it sees root's files as the overflow
// uid's, and its own uid 0 is the container's. There a file is read only if
// nothing in the namespace can have written it or any directory on its way
// from / (package nstrust: owners the namespace does not map, no write for
// group or others but in sticky directories, no link), so the container's
// root can never plant a cache the hook trusts; and the hook never writes
// (Save is ErrReadOnly): the cache it reads is one a hook running as root
// left since the last boot or driver change, any start of a container
// without such a namespace, or a prestart hook (hooks.d, Docker's --gpus),
// which runs as root in the runtime's namespaces even for a container with
// one. Where no hook runs as root, every start asks the host. A refused
// file is ErrUntrusted, which the hook logs as a warning.
package probecache
