package stackprobe

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

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/capability"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/vendorstack"
)

// rocdxgNames are looked up under <rocm>/lib in this order: the SONAME
// link the package installs, then the development link.
var rocdxgNames = []string{"librocdxg.so.1", "librocdxg.so"}

// ROCm looks for librocdxg and dids.conf under dir. The install is the
// host's own (root's choice in the config), so symlinks in it are followed,
// as the loader would; what is found must be a regular file everyone may
// read, because the container's user need not be root.
func ROCm(dir string) vendorstack.ROCm {
	r := vendorstack.ROCm{Dir: dir, Err: vendorstack.ErrNoRocdxg}
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

// DRI lists the card and render nodes in dir, cards first, each by
// number. A missing dir is no nodes, not an error: most WSL hosts without a
// video-capable driver have none.
func DRI(dir string) ([]vendorstack.Node, error) {
	des, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	var out []vendorstack.Node
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
		out = append(out, vendorstack.Node{Name: de.Name(), HostPath: p, Major: unix.Major(st.Rdev), Minor: unix.Minor(st.Rdev)})
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

// WSLg looks for WSLg's sockets under dir (/mnt/wslg): .X11-unix/X<n>,
// runtime-dir/wayland-<n> and PulseServer. What is missing is left empty.
func WSLg(dir string) vendorstack.WSLg {
	w := vendorstack.WSLg{Dir: dir, Display: -1}
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

// Options are the host paths to probe (config: rocm_dir, dri_dir,
// wslg_dir).
type Options struct {
	ROCmDir, DRIDir, WSLgDir string
}

// For probes what a container with caps may need on a host with these
// adapters, and nothing else, since it runs on every container start:
// ROCm when the host has an AMD GPU, /dev/dri for video, WSLg for display.
func For(o Options, host []vendorstack.Adapter, caps capability.Set) (vendorstack.Host, error) {
	var h vendorstack.Host
	if rocm, _, _ := vendorstack.Needs(host, 0); rocm {
		h.ROCm = ROCm(o.ROCmDir)
	}
	if caps.Has(capability.Video) {
		dri, err := DRI(o.DRIDir)
		if err != nil {
			return h, err
		}
		h.DRI = dri
	}
	if caps.Has(capability.Display) {
		h.WSLg = WSLg(o.WSLgDir)
	}
	return h, nil
}
