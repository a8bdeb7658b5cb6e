package vendorstack

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"

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

var driName = regexp.MustCompile(`^(card|renderD)[0-9]+$`)

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
		if !driName.MatchString(de.Name()) {
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
	pa, na := splitNode(a)
	pb, nb := splitNode(b)
	if pa != pb {
		return pa == "card"
	}
	return na < nb
}

func splitNode(s string) (string, int) {
	m := driName.FindStringSubmatch(s)
	n, _ := strconv.Atoi(s[len(m[1]):])
	return m[1], n
}

var (
	x11Socket     = regexp.MustCompile(`^X([0-9]+)$`)
	waylandSocket = regexp.MustCompile(`^wayland-[0-9]+$`)
)

// ProbeWSLg looks for WSLg's sockets under dir (/mnt/wslg): .X11-unix/X<n>,
// runtime-dir/wayland-<n> and PulseServer. What is missing is left empty.
func ProbeWSLg(dir string) WSLg {
	w := WSLg{Dir: dir, Display: -1}
	x11 := filepath.Join(dir, ".X11-unix")
	if des, err := os.ReadDir(x11); err == nil {
		for _, de := range des {
			m := x11Socket.FindStringSubmatch(de.Name())
			if m == nil || de.Type()&fs.ModeSocket == 0 {
				continue
			}
			n, _ := strconv.Atoi(m[1])
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
			if waylandSocket.MatchString(de.Name()) && de.Type()&fs.ModeSocket != 0 {
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
