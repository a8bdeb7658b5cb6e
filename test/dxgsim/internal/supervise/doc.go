// Package supervise answers seccomp user notifications for the simulated
// /dev/dxg: it decides which notifications are really dxg ioctls (request
// number in the dxg set and the fd a character device with the simulated
// node's device number), identifies the calling process (tgid and start
// time, so pid reuse is not confused), gives the emulator the caller's
// memory (process_vm_readv/writev) and sends the answer. Everything else is
// answered with SECCOMP_USER_NOTIF_FLAG_CONTINUE and runs in the kernel.
//
// One goroutine receives; each notification is handled on its own
// goroutine, bounded, so hundreds of concurrent callers do not queue behind
// a slow one. Process exits are watched with pidfds in one epoll set, so a
// process's handle table is released when it exits (exit releases its dxg
// files, and the driver frees the handles with them) and the memory held
// stays proportional to the processes alive now. When dxgsim stops, a
// process still running is asked through /proc whether it still holds the
// device: if it does, its handles are a leak; if not, its last close freed
// them.
package supervise
