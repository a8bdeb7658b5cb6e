package stackprobe

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/privileged"

	"golang.org/x/sys/unix"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/driverstore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/capability"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/vendorstack"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/fixture"
)

func TestProbeROCm(t *testing.T) {
	tests := []struct {
		name      string
		tree      []string
		wantLib   string // relative to the tree, "" for none
		wantShare string
		wantErr   string
	}{
		{
			name: "a packaged install behind /opt/rocm",
			tree: []string{"symlink opt/rocm rocm-7.2.0", "file opt/rocm-7.2.0/lib/librocdxg.so.1.2.0 x",
				"symlink opt/rocm-7.2.0/lib/librocdxg.so.1 librocdxg.so.1.2.0", "symlink opt/rocm-7.2.0/lib/librocdxg.so librocdxg.so.1",
				"file opt/rocm-7.2.0/share/rocdxg/dids.conf x"},
			wantLib: "opt/rocm/lib/librocdxg.so.1", wantShare: "opt/rocm/share/rocdxg",
		},
		{
			name:    "only the development name, no dids.conf",
			tree:    []string{"file opt/rocm/lib/librocdxg.so x", "dir opt/rocm/share/rocdxg"},
			wantLib: "opt/rocm/lib/librocdxg.so",
		},
		{
			name:    "ROCm without librocdxg",
			tree:    []string{"file opt/rocm/lib/libhsa-runtime64.so.1 x", "file opt/rocm/share/rocdxg/dids.conf x"},
			wantErr: "no librocdxg", wantShare: "opt/rocm/share/rocdxg",
		},
		{
			name:    "no ROCm at all",
			wantErr: "no librocdxg",
		},
		{
			name:    "a library only root may read",
			tree:    []string{"file opt/rocm/lib/librocdxg.so.1 x", "mode opt/rocm/lib/librocdxg.so.1 600"},
			wantErr: "is not readable by everyone (mode 600)",
		},
		{
			name:    "a directory where the library should be",
			tree:    []string{"dir opt/rocm/lib/librocdxg.so.1"},
			wantErr: "is not a regular file",
		},
		{
			name:    "a dangling link falls back to the next name",
			tree:    []string{"symlink opt/rocm/lib/librocdxg.so.1 gone", "file opt/rocm/lib/librocdxg.so x"},
			wantLib: "opt/rocm/lib/librocdxg.so",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			fixture.Tree(t, root, tt.tree...)
			dir := filepath.Join(root, "opt/rocm")
			got := ROCm(dir)
			abs := func(p string) string {
				if p == "" {
					return ""
				}
				return filepath.Join(root, p)
			}
			if got.Dir != dir || got.Lib != abs(tt.wantLib) || got.Share != abs(tt.wantShare) {
				t.Errorf("ROCm = %+v\nwant lib %q share %q", got, abs(tt.wantLib), abs(tt.wantShare))
			}
			if tt.wantErr == "" && got.Err != nil || tt.wantErr != "" && (got.Err == nil || !strings.Contains(got.Err.Error(), tt.wantErr)) {
				t.Errorf("Err = %v, want %q", got.Err, tt.wantErr)
			}
			if tt.wantErr == "no librocdxg" && !errors.Is(got.Err, vendorstack.ErrNoRocdxg) {
				t.Errorf("Err = %v, want vendorstack.ErrNoRocdxg", got.Err)
			}
		})
	}
}

func TestProbeWSLg(t *testing.T) {
	tests := []struct {
		name string
		tree []string
		want vendorstack.WSLg // paths relative to the wslg dir
	}{
		{
			name: "a running WSLg",
			tree: []string{"file runtime-dir/wayland-0.lock x", "file weston.log x",
				"socket .X11-unix/X0", "socket runtime-dir/wayland-0", "socket runtime-dir/pulse/native", "socket PulseServer"},
			want: vendorstack.WSLg{X11: ".X11-unix", Display: 0, RuntimeDir: "runtime-dir", Wayland: "wayland-0", Pulse: "PulseServer"},
		},
		{
			name: "the lowest X display wins",
			tree: []string{"socket .X11-unix/X2", "socket .X11-unix/X1"},
			want: vendorstack.WSLg{X11: ".X11-unix", Display: 1},
		},
		{
			name: "files named like sockets are not sockets",
			tree: []string{"file .X11-unix/X0 x", "file runtime-dir/wayland-0 x", "file PulseServer x"},
			want: vendorstack.WSLg{Display: -1, RuntimeDir: "runtime-dir"},
		},
		{
			name: "no WSLg",
			want: vendorstack.WSLg{Display: -1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			dir := filepath.Join(root, "wslg")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			fixture.Tree(t, dir, tt.tree...)
			want := tt.want
			want.Dir = dir
			for _, p := range []*string{&want.X11, &want.RuntimeDir, &want.Pulse} {
				if *p != "" {
					*p = filepath.Join(dir, *p)
				}
			}
			if got := WSLg(dir); !reflect.DeepEqual(got, want) {
				t.Errorf("WSLg = %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestProbeDRI(t *testing.T) {
	t.Run("missing dir", func(t *testing.T) {
		got, err := DRI(filepath.Join(t.TempDir(), "dri"))
		if got != nil || err != nil {
			t.Fatalf("DRI = %v, %v; want nothing", got, err)
		}
	})
	t.Run("nodes", func(t *testing.T) {
		privileged.Require(t, "mknod")
		dir := t.TempDir()
		// /dev/dri as WSL has it, with /dev/null's and /dev/zero's numbers
		// standing in for the DRM ones; plus what must be skipped.
		for _, n := range []struct {
			name string
			dev  uint64
		}{{"renderD128", unix.Mkdev(1, 5)}, {"card1", unix.Mkdev(1, 3)}, {"card0", unix.Mkdev(1, 3)}, {"controlD64", unix.Mkdev(1, 3)}} {
			if err := unix.Mknod(filepath.Join(dir, n.name), unix.S_IFCHR|0o666, int(n.dev)); err != nil {
				t.Fatal(err)
			}
		}
		fixture.Tree(t, dir, "dir by-path", "file card9 x", "symlink renderD129 card0")
		got, err := DRI(dir)
		if err != nil {
			t.Fatal(err)
		}
		want := []vendorstack.Node{
			{Name: "card0", HostPath: filepath.Join(dir, "card0"), Major: 1, Minor: 3},
			{Name: "card1", HostPath: filepath.Join(dir, "card1"), Major: 1, Minor: 3},
			{Name: "renderD128", HostPath: filepath.Join(dir, "renderD128"), Major: 1, Minor: 5},
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("DRI = %+v\nwant %+v", got, want)
		}
	})
}

// For looks only where the request can need: the hook runs it on
// every container start.
func TestProbeFor(t *testing.T) {
	iris := vendorstack.Adapter{Index: 0, Vendor: driverstore.Intel, Description: "Intel(R) Iris(R) Xe Graphics"}
	rtx := vendorstack.Adapter{Index: 1, Vendor: driverstore.NVIDIA, Description: "NVIDIA GeForce RTX 3060 Laptop GPU"}
	radeon := vendorstack.Adapter{Index: 0, Vendor: driverstore.AMD, Description: "AMD Radeon RX 7900 XTX"}
	root := t.TempDir()
	fixture.Tree(t, root, "file opt/rocm/lib/librocdxg.so.1 x", "dir mnt/wslg", "socket mnt/wslg/.X11-unix/X0")
	o := Options{ROCmDir: filepath.Join(root, "opt/rocm"), DRIDir: filepath.Join(root, "dev/dri"), WSLgDir: filepath.Join(root, "mnt/wslg")}
	tests := []struct {
		name       string
		host       []vendorstack.Adapter
		caps       capability.Set
		rocm, wslg bool
	}{
		{"nvidia laptop, compute", []vendorstack.Adapter{iris, rtx}, capability.Compute, false, false},
		{"amd desktop, compute", []vendorstack.Adapter{radeon}, capability.Compute, true, false},
		{"amd npu only", []vendorstack.Adapter{{Index: 0, Vendor: driverstore.AMD, ComputeOnly: true}}, capability.Compute, false, false},
		{"display", []vendorstack.Adapter{rtx}, capability.Compute | capability.Display, false, true},
	}
	for _, tt := range tests {
		h, err := For(o, tt.host, tt.caps)
		if err != nil {
			t.Fatal(err)
		}
		if (h.ROCm.Lib != "") != tt.rocm || (h.WSLg.X11 != "") != tt.wslg {
			t.Errorf("%s: probed %+v, want rocm %v wslg %v", tt.name, h, tt.rocm, tt.wslg)
		}
	}
}

// TestNameChecks pins the hand-written name checks to the patterns they
// replace (compiled here, in the test, not at every hook start), and their
// numbers to strconv.Atoi of the digits.
func TestNameChecks(t *testing.T) {
	dri := regexp.MustCompile(`^(card|renderD)[0-9]+$`)
	x11 := regexp.MustCompile(`^X([0-9]+)$`)
	wayland := regexp.MustCompile(`^wayland-[0-9]+$`)
	for _, s := range []string{
		"", "card", "card0", "card1", "card12", "card1x", "xcard1", "card-1", "card 1", "Card0", "card٣",
		"renderD", "renderD128", "renderD12a", "renderd128", "render128", "controlD64", "by-path",
		"card99999999999999999999999", "renderD0128",
		"X", "X0", "X1", "X12", "X12a", "x0", "X-1", "X0.lock", ".X0", "X99999999999999999999999",
		"wayland-", "wayland-0", "wayland-1", "wayland-0.lock", "wayland-a", "wayland0", "wayland--1", "Wayland-0",
	} {
		kind, n, ok := driNode(s)
		if m := dri.FindStringSubmatch(s); ok != (m != nil) {
			t.Errorf("driNode(%q) ok = %v, the pattern says %v", s, ok, m != nil)
		} else if ok {
			want, _ := strconv.Atoi(s[len(m[1]):])
			if kind != m[1] || n != want {
				t.Errorf("driNode(%q) = %q, %d; want %q, %d", s, kind, n, m[1], want)
			}
		}
		d, ok := x11Display(s)
		if m := x11.FindStringSubmatch(s); ok != (m != nil) {
			t.Errorf("x11Display(%q) ok = %v, the pattern says %v", s, ok, m != nil)
		} else if ok {
			if want, _ := strconv.Atoi(m[1]); d != want {
				t.Errorf("x11Display(%q) = %d, want %d", s, d, want)
			}
		}
		if got, want := isWaylandSocket(s), wayland.MatchString(s); got != want {
			t.Errorf("isWaylandSocket(%q) = %v, the pattern says %v", s, got, want)
		}
	}
}
