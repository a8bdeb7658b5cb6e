// Command stepkill runs a command and SIGKILLs it at its N-th state-changing
// system call, before the call runs: what a start killed by an OOM killer,
// a timeout or a reboot at that moment leaves behind. Tests use it to kill
// the hook at every step of its work in turn and then start the container
// again. It is a test tool and is never shipped with the hook.
//
//	stepkill --at N [--report FILE] [--skip PATH]... -- CMD ARGS...
//
// A step is a system call that changes a file system or the mount table: a
// directory, node, link or rename made or removed, a mode or owner changed,
// a file opened to create or truncate it (O_CREAT, O_TRUNC, O_TMPFILE), a
// write to a regular file, a truncate, and every mount system call (mount,
// umount2, open_tree, mount_setattr, move_mount). Writes to the files named
// by --skip (a log) are not steps; nor are writes to pipes, sockets or
// event fds, which the Go runtime makes on its own.
//
// How: stepkill starts CMD traced (ptrace), stops every thread of it (and
// of what it starts) at each system call's entry, reads the call's
// arguments (paths from the caller's memory through /proc, descriptors
// through its fd links), and at step N SIGKILLs CMD before the call runs.
// Not seccomp user notification, as dxgsim uses: a filter chain holds one
// listener at most, and the hooks under test run below dxgsim's (EBUSY).
// Stopping at every call costs CMD a few microseconds each.
//
// --at 0 never kills: the run lists CMD's steps. --report FILE gets one
// line per step ("step N: CALL ARGS") and a last line, "killed at step N"
// or "exit S after N steps". stepkill exits with CMD's status, 137 when it
// killed CMD (and then says so in one line on stderr), 125 when it could
// not set up, 127 when CMD is not found.
//
// Only x86_64's native system calls are understood. CMD's descendants are
// traced too: their steps count, and a kill kills them all.
package main
