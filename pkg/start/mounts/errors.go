package mounts

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// Op names the operation of a step that failed. Callers choose what to tell
// users from it: the values are a stable interface, never carry paths.
type Op string

// Operations a step can fail in.
const (
	// OpResolveParent is resolving (and creating) the target's parent
	// directories confined to the rootfs: it fails on image links that
	// do not resolve inside it, files in the way, or a full filesystem.
	OpResolveParent    Op = "mkdir parent"
	OpStat             Op = "stat"
	OpChmod            Op = "chmod"
	OpReplace          Op = "replace"
	OpRemoveExisting   Op = "remove existing"
	OpMknod            Op = "mknod"
	OpCreateMountPoint Op = "create mount point"
	OpOpenMountPoint   Op = "open mount point"
	OpMkdir            Op = "mkdir"
	// OpOpenTree is cloning the host's Source: only a change on the host
	// makes it fail.
	OpOpenTree     Op = "open_tree"
	OpSetattr      Op = "mount_setattr"
	OpMoveMount    Op = "move_mount"
	OpReadExisting Op = "read existing"
	OpBuildContent Op = "build content"
	OpWrite        Op = "write"
	OpSymlink      Op = "symlink"
	OpPlan         Op = "plan"
)

// Error is a failed step, after runc's mountError: what was done (Op), to
// which container path (Target) from which host path (Source, for binds
// and bound nodes), and the errno when a system call refused.
type Error struct {
	Kind   Kind
	Op     Op
	Source string
	Target string
	// Errno is the system call's error; 0 when the cause is not one.
	Errno unix.Errno
	Err   error
}

func newError(s Step, op Op, err error) *Error {
	e := &Error{Kind: s.Kind, Op: op, Target: s.Target, Err: err}
	if s.Kind == Bind || s.Kind == BindFile || (s.Kind == Device && s.BindNode) || op == OpOpenTree {
		e.Source = s.Source
	}
	errors.As(err, &e.Errno)
	return e
}

func (e *Error) Error() string {
	op := string(e.Op)
	if e.Op == OpOpenTree {
		op += " " + e.Source
	}
	return fmt.Sprintf("%s %s: %s: %v", e.Kind, e.Target, op, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Advise adds to an Apply error what the user should do, chosen from the
// Error's fields. Other errors are returned as they are.
func Advise(err error) error {
	var e *Error
	if !errors.As(err, &e) {
		return err
	}
	if advice := e.advice(); advice != "" {
		return fmt.Errorf("%w: %s", err, advice)
	}
	return err
}

func (e *Error) advice() string {
	switch {
	case e.Errno == unix.EROFS:
		return "the container's root filesystem is read-only before the hook ran: let the runtime make it read-only (config.json root.readonly), not the storage"
	case e.Errno == unix.ENOSPC, e.Errno == unix.EDQUOT:
		return "the container's root filesystem is full: free space in the image's storage"
	case e.Op == OpResolveParent:
		return "the image has a file or a link that does not resolve inside it on this path: fix the image"
	case e.Op == OpOpenTree && e.Errno == unix.ENOENT:
		return "the host's WSL files changed while the hook ran (a Windows driver update?): run wsl --shutdown and start the container again"
	case e.Errno == unix.ENOENT:
		// The hook holds a handle on the parent directory; only its removal
		// meanwhile makes a create in it fail so.
		return "a directory of the image on this path was removed while the hook worked in it: something is changing the container's root filesystem during its start: stop that and start the container again"
	}
	return ""
}
