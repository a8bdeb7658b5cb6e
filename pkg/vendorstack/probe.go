package vendorstack

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/capability"
)

// Defaults of the host paths probed.
const (
	DefaultROCmDir = "/opt/rocm"
	DefaultDRIDir  = "/dev/dri"
	DefaultWSLgDir = "/mnt/wslg"
)

// Host is what the probes found.
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

// rocdxgNames are looked up under <rocm>/lib in this order: the SONAME
// link the package installs, then the development link.
var rocdxgNames = []string{"librocdxg.so.1", "librocdxg.so"}

// ErrNoRocdxg is ROCm.Err when the install has no librocdxg.
var ErrNoRocdxg = errors.New("no librocdxg")

// ProbeROCm looks for librocdxg and dids.conf under dir. The install is the
// host's own (root's choice in the config), so symlinks in it are followed,
// as the loader would; what is found must be a regular file everyone may
// read, because the container's user need not be root.
func ProbeROCm(dir string) ROCm {
	r := ROCm{Dir: dir, Err: ErrNoRocdxg}
	for _, n := range rocdxgNames {
		p := filepath.Join(dir, "lib", n)
		// Stat follows the install's links (/opt/rocm -> rocm-7.2.0,
		// .so.1 -> .so.1.2.0) as the loader would; a dangling one counts
		// as missing. One call: this runs at every AMD container start.
		fi, err := os.Stat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue
		case err != nil:
			r.Err = err
		case !fi.Mode().IsRegular():
			r.Err = fmt.Errorf("%s is not a regular file", p)
		case fi.Mode().Perm()&0o004 == 0:
			r.Err = fmt.Errorf("%s is not readable by everyone (mode %o)", p, fi.Mode().Perm())
		default:
			r.Lib, r.Err = p, nil
		}
		break
	}
	share := filepath.Join(dir, "share", "rocdxg")
	if fi, err := os.Stat(filepath.Join(share, "dids.conf")); err == nil && fi.Mode().IsRegular() {
		r.Share = share
	}
	return r
}

// ProbeDRI lists the card and render nodes in dir, cards first, each by
// number. A missing dir is no nodes, not an error: most WSL hosts without a
// video-capable driver have none.
func ProbeDRI(dir string) ([]Node, error) {
	des, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	var out []Node
	for _, de := range des {
		if _, _, ok := driNode(de.Name()); !ok {
			continue
		}
		p := filepath.Join(dir, de.Name())
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return nil, fmt.Errorf("stat %s: %w", p, err)
		}
		if st.Mode&unix.S_IFMT != unix.S_IFCHR {
			continue
		}
		out = append(out, Node{Name: de.Name(), HostPath: p, Major: unix.Major(st.Rdev), Minor: unix.Minor(st.Rdev)})
	}
	sort.Slice(out, func(i, j int) bool { return nodeLess(out[i].Name, out[j].Name) })
	return out, nil
}

func nodeLess(a, b string) bool {
	pa, na, _ := driNode(a)
	pb, nb, _ := driNode(b)
	if pa != pb {
		return pa == "card"
	}
	return na < nb
}

// The name checks below are plain functions, not regexps: the hook links
// this package, and compiling three regexps at its init cost ~0.3 ms of
// every container start. TestNameChecks pins each to the pattern it
// replaces.

// driNode splits a DRM node name matching ^(card|renderD)[0-9]+$ into its
// kind and number; ok is false for any other name. A number too large for
// an int is clamped as strconv.Atoi does.
func driNode(name string) (kind string, n int, ok bool) {
	for _, k := range [...]string{"card", "renderD"} {
		if num, found := strings.CutPrefix(name, k); found && isDigits(num) {
			n, _ = strconv.Atoi(num)
			return k, n, true
		}
	}
	return "", 0, false
}

// x11Display returns n for an X server socket name matching ^X([0-9]+)$.
func x11Display(name string) (n int, ok bool) {
	num, found := strings.CutPrefix(name, "X")
	if !found || !isDigits(num) {
		return 0, false
	}
	n, _ = strconv.Atoi(num)
	return n, true
}

// isWaylandSocket reports a name matching ^wayland-[0-9]+$.
func isWaylandSocket(name string) bool {
	num, found := strings.CutPrefix(name, "wayland-")
	return found && isDigits(num)
}

// isDigits reports a non-empty string of ASCII digits: [0-9]+.
func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// ProbeWSLg looks for WSLg's sockets under dir (/mnt/wslg): .X11-unix/X<n>,
// runtime-dir/wayland-<n> and PulseServer. What is missing is left empty.
func ProbeWSLg(dir string) WSLg {
	w := WSLg{Dir: dir, Display: -1}
	x11 := filepath.Join(dir, ".X11-unix")
	if des, err := os.ReadDir(x11); err == nil {
		for _, de := range des {
			n, ok := x11Display(de.Name())
			if !ok || de.Type()&fs.ModeSocket == 0 {
				continue
			}
			if w.Display < 0 || n < w.Display {
				w.Display = n
			}
		}
		if w.Display >= 0 {
			w.X11 = x11
		}
	}
	rt := filepath.Join(dir, "runtime-dir")
	if des, err := os.ReadDir(rt); err == nil {
		w.RuntimeDir = rt
		for _, de := range des {
			if isWaylandSocket(de.Name()) && de.Type()&fs.ModeSocket != 0 {
				w.Wayland = de.Name()
				break
			}
		}
	}
	pulse := filepath.Join(dir, "PulseServer")
	if fi, err := os.Lstat(pulse); err == nil && fi.Mode()&fs.ModeSocket != 0 {
		w.Pulse = pulse
	}
	return w
}

// ProbeOptions are the host paths to probe (config: rocm_dir, dri_dir,
// wslg_dir).
type ProbeOptions struct {
	ROCmDir, DRIDir, WSLgDir string
}

// ProbeFor probes what a container with caps may need on a host with these
// adapters, and nothing else, since it runs on every container start:
// ROCm when the host has an AMD GPU, /dev/dri for video, WSLg for display.
func ProbeFor(o ProbeOptions, host []Adapter, caps capability.Set) (Host, error) {
	var h Host
	for _, a := range host {
		if a.rocmGPU() {
			h.ROCm = ProbeROCm(o.ROCmDir)
			break
		}
	}
	if caps.Has(capability.Video) {
		dri, err := ProbeDRI(o.DRIDir)
		if err != nil {
			return h, err
		}
		h.DRI = dri
	}
	if caps.Has(capability.Display) {
		h.WSLg = ProbeWSLg(o.WSLgDir)
	}
	return h, nil
}
