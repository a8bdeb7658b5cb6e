package vendorstack

import "errors"

// Defaults of the host paths probed.
const (
	DefaultROCmDir = "/opt/rocm"
	DefaultDRIDir  = "/dev/dri"
	DefaultWSLgDir = "/mnt/wslg"
)

// Host is what the probes found (package stackprobe probes it).
type Host struct {
	ROCm ROCm
	DRI  []Node
	WSLg WSLg
}

// ROCm is the host's ROCm install as far as WSL needs it.
type ROCm struct {
	// Dir is the install probed (rocm_dir).
	Dir string
	// Lib is the host path of librocdxg as found under Dir, links
	// unresolved so a spec naming it survives a ROCm upgrade; "" when
	// there is none usable, and then Err says why.
	Lib string
	Err error
	// Share is the host's share/rocdxg directory holding dids.conf, ""
	// when there is none (some librocdxg 1.2.0 packages ship without it).
	Share string
}

// Node is a character device of the host.
type Node struct {
	Name         string // file name under the probed directory ("renderD128")
	HostPath     string
	Major, Minor uint32
}

// WSLg is what WSLg's socket directory offers.
type WSLg struct {
	Dir string
	// X11 is the host directory holding X server sockets, "" if none;
	// Display the lowest display number found there (-1 if none).
	X11     string
	Display int
	// RuntimeDir is WSLg's XDG runtime directory, "" if none; Wayland the
	// name of a Wayland socket in it, "" if none.
	RuntimeDir string
	Wayland    string
	// Pulse is the PulseAudio server socket, "" if none.
	Pulse string
}

// ErrNoRocdxg is ROCm.Err when the install has no librocdxg.
var ErrNoRocdxg = errors.New("no librocdxg")
