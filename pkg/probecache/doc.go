// Package probecache keeps what one container start learned of the host
// (the adapters, their driver store folders, nvidia-smi's place and the lib
// dir's loader-cache entries) in a file under /run, so the next start checks
// it with a few cheap calls instead of asking the Windows host again.
//
// On WSL each adapter query is a VM-bus message to the Windows host, and
// /usr/lib/wsl is a 9p mount of Windows folders where every lookup, open,
// read and close is a round trip to a file server on Windows. A start with
// a fresh cache sends the guest-side listing (ENUMADAPTERS3, which gives the
// LUIDs) and stats the lib dir and the drivers dir once each; nothing else
// of the probe reaches the host.
//
// A cached probe is used only when everything it depends on is unchanged:
//
//   - the boot (/proc/sys/kernel/random/boot_id): a cache from another boot
//     of the VM is never used, even where /run is not a tmpfs;
//   - the configured device, lib dir and drivers dir, and what was asked
//     (the adapters' details, the loader-cache entries);
//   - the adapters' LUIDs, in order: the Windows host assigns an adapter a
//     new LUID each time it starts it, which a driver update, a reset or a
//     new adapter does, and the listing is answered in the guest;
//   - one stat of the lib dir and of the drivers dir: device, inode, mode,
//     modification and change times. A driver update adds a folder to the
//     driver store (FileRepository), which moves its modification time;
//     a file added to or removed from the lib dir moves the lib dir's.
//
// A file that is not a regular file owned by this user, is writable by
// others, is larger than MaxSize, does not decode, or holds anything a
// probe could not have produced is ignored and replaced, never trusted:
// the hook runs as root. Files are replaced atomically (pkg/atomicfile).
package probecache
