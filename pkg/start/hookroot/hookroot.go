package hookroot

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Source is where a hook got the directory it would take for the root
// filesystem: the line that refuses one names it.
type Source int

const (
	// WorkingDir is the hook's working directory: runc changes into the
	// root filesystem before it runs the createContainer hooks.
	WorkingDir Source = iota
	// StateRoot is the state's "root", which crun adds.
	StateRoot
	// ConfigRoot is config.json's root.path: the hook of a CDI spec from
	// before selections were arguments reads config.json.
	ConfigRoot
)

func (s Source) String() string {
	switch s {
	case StateRoot:
		return "the state's root"
	case ConfigRoot:
		return "config.json's root.path"
	}
	return "the working directory"
}

// FileID is what identifies a file: its device and inode numbers.
type FileID struct{ Dev, Ino uint64 }

// Facts is what the kernel says of a directory a hook was handed and of
// the places it must not be. A nil pointer is a fact that could not be
// learnt.
type Facts struct {
	Path   string // as the refusal names it
	Source Source
	Dir    FileID
	// MountRoot says whether Dir is the root of a mount; nil on a kernel
	// that does not say (before 5.8).
	MountRoot *bool
	// Root is the hook's /.
	Root FileID
	// Bundle is the state's bundle; nil when the hook cannot reach it (a
	// container's user namespace may not).
	Bundle *FileID
	// MountNS is the hook's mount namespace; InitMountNS pid 1's in
	// /proc, nil when the hook may not look (EACCES in a user namespace).
	MountNS     FileID
	InitMountNS *FileID
}

// Reason is why a directory is not taken for the root filesystem.
type Reason int

// Reasons, in the order Check tests them.
const (
	// HostRoot: the directory is the host's /.
	HostRoot Reason = iota + 1
	// Bundle: the directory is the bundle.
	Bundle
	// NotMountRoot: nothing is mounted at the directory, as runc and crun
	// mount the root filesystem they prepared.
	NotMountRoot
	// MountRootUnknown: the kernel does not say whether it is a mount root.
	MountRootUnknown
	// HostMountNS: the hook runs in pid 1's mount namespace.
	HostMountNS
)

// RefusedError is a directory a hook was handed that is not the
// container's root filesystem, as one line: what it is, what the runtime
// did, what to do.
type RefusedError struct {
	Path   string
	Source Source
	Reason Reason
}

// useRuntime is the advice when the runtime ran the hook where runc and
// crun do not.
const useRuntime = "run the container with runc or crun"

func (e *RefusedError) Error() string {
	what := e.Source.String() + " " + e.Path
	named := e.Source != WorkingDir // the runtime named it; it did not run the hook there
	switch e.Reason {
	case HostRoot:
		if named {
			return what + " is the host's root directory: the container runs on the host's own root (podman --rootfs /), where a CDI device would change the host: give the container a root filesystem of its own"
		}
		return what + " is the host's root directory: the runtime ran the hook outside the container's root filesystem: " + useRuntime
	case Bundle:
		if named {
			return what + " is the bundle, not a root filesystem of its own: put the container's root filesystem in a directory of its own"
		}
		return what + " is the bundle: the runtime ran the hook there, not in the container's root filesystem: " + useRuntime
	case NotMountRoot:
		if named {
			return what + " is not a mount root: the runtime ran the hook before it mounted the container's root filesystem (runc and crun bind it onto itself first): " + useRuntime
		}
		return what + " is not a mount root: the runtime ran the hook outside the container's root filesystem (runc and crun run it in the root filesystem they bound onto itself): " + useRuntime
	case MountRootUnknown:
		return "cannot tell whether " + what + " is the container's root filesystem: the kernel does not say whether it is a mount root (Linux 5.8 and later do): update the kernel (on WSL: wsl --update)"
	case HostMountNS:
		return "the hook runs in the host's mount namespace (pid 1's), not in the container's: the runtime ran the createContainer hook outside the container: " + useRuntime
	}
	return fmt.Sprintf("%s is not the container's root filesystem (reason %d)", what, e.Reason)
}

// Check decides whether the directory f describes is the container's
// root filesystem: nil, or a *RefusedError saying why not.
func Check(f Facts) error {
	refuse := func(r Reason) error { return &RefusedError{Path: f.Path, Source: f.Source, Reason: r} }
	switch {
	case f.Dir == f.Root:
		return refuse(HostRoot)
	case f.Bundle != nil && f.Dir == *f.Bundle:
		return refuse(Bundle)
	case f.MountRoot == nil:
		return refuse(MountRootUnknown)
	case !*f.MountRoot:
		return refuse(NotMountRoot)
	case f.InitMountNS != nil && f.MountNS == *f.InitMountNS:
		return refuse(HostMountNS)
	}
	return nil
}

// Root is a directory Open proved to be the container's root
// filesystem, held open: FD is an O_PATH descriptor of it, through which
// the hook reaches everything in it; Path names it in logs.
type Root struct {
	FD   int
	Path string
}

// Close closes the descriptor.
func (r *Root) Close() error {
	if r == nil || r.FD < 0 {
		return nil
	}
	err := unix.Close(r.FD)
	r.FD = -1
	return err
}
