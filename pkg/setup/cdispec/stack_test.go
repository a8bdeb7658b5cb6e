package cdispec

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	oci "github.com/opencontainers/runtime-spec/specs-go"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/driverstore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/cdiselect"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/vendorstack"
)

func described(index int, v driverstore.Vendor, luid uint32, folder, desc string) driverstore.Adapter {
	a := adapter(index, v, luid, folder)
	a.Description = desc
	return a
}

// The hosts of test/simhost with their descriptions, and what the stack
// probes find on them.
var (
	amdDesktop = &driverstore.Inventory{Adapters: []driverstore.Adapter{
		described(0, driverstore.AMD, 0x10b3c, "u0398975.inf_amd64_cab3843582148687", "AMD Radeon RX 7900 XTX"),
	}}
	arcDesktop = &driverstore.Inventory{Adapters: []driverstore.Adapter{
		described(0, driverstore.Intel, 0x11c5e, "iigd_dch.inf_amd64_8d7e3f0c5a1b2946", "Intel(R) UHD Graphics 770"),
		described(1, driverstore.Intel, 0x12f3a, "iigd_dch.inf_amd64_8d7e3f0c5a1b2946", "Intel(R) Arc(TM) A770 Graphics"),
	}}
	fullStack = vendorstack.Host{
		ROCm: vendorstack.ROCm{Dir: "/opt/rocm", Lib: "/opt/rocm/lib/librocdxg.so.1", Share: "/opt/rocm/share/rocdxg"},
		DRI: []vendorstack.Node{{Name: "card0", HostPath: "/dev/dri/card0", Major: 226, Minor: 0},
			{Name: "renderD128", HostPath: "/dev/dri/renderD128", Major: 226, Minor: 128}},
		WSLg: vendorstack.WSLg{Dir: "/mnt/wslg", X11: "/mnt/wslg/.X11-unix", Display: 0, RuntimeDir: "/mnt/wslg/runtime-dir", Wayland: "wayland-0"},
	}
)

// injected is what an engine puts into a container for devices, as the
// CDI library does it.
func injected(t *testing.T, inv *driverstore.Inventory, stack vendorstack.Host, devices ...string) *oci.Spec {
	t.Helper()
	o := opts
	o.Stack = stack
	dir := writeSpecs(t, inv, o)
	cache, err := cdiapi.NewCache(cdiapi.WithSpecDirs(dir), cdiapi.WithAutoRefresh(false))
	if err != nil || len(cache.GetErrors()) > 0 {
		t.Fatalf("engines would reject the specs: %v %v", err, cache.GetErrors())
	}
	spec := &oci.Spec{Process: &oci.Process{Env: []string{"PATH=/bin"}}}
	if unresolved, err := cache.InjectDevices(spec, devices...); err != nil {
		t.Fatalf("inject %v: %v (unresolved %v)", devices, err, unresolved)
	}
	return spec
}

// envValue is a variable's value as the container sees it, "" if unset.
func envValue(spec *oci.Spec, name string) string {
	v := ""
	for _, kv := range spec.Process.Env {
		if k, val, _ := strings.Cut(kv, "="); k == name {
			v = val
		}
	}
	return v
}

func mountTargets(spec *oci.Spec) []string {
	var out []string
	for _, m := range spec.Mounts {
		out = append(out, m.Destination)
	}
	return out
}

func TestStackDevices(t *testing.T) {
	rocm := []string{"/usr/lib/wsl/lib", "/usr/lib/librocdxg.so.1", "/usr/lib/librocdxg.so", "/usr/share/rocdxg"}
	tests := []struct {
		name       string
		inv        *driverstore.Inventory
		stack      vendorstack.Host
		devices    []string
		wantMounts []string
		wantEnv    map[string]string
		wantNodes  []string
	}{
		{"amd.com/gpu=all", amdDesktop, fullStack, []string{"amd.com/gpu=all"}, rocm, map[string]string{"HSA_ENABLE_DXG_DETECTION": "1"}, nil},
		{"amd.com/gpu=0", amdDesktop, fullStack, []string{"amd.com/gpu=0"}, rocm, map[string]string{"HSA_ENABLE_DXG_DETECTION": "1"}, nil},
		{"our all on AMD", amdDesktop, fullStack, []string{"wsl-gpu-hook.dev/gpu=all"}, rocm, map[string]string{"HSA_ENABLE_DXG_DETECTION": "1"}, nil},
		{"our amd and index together: one of each", amdDesktop, fullStack, []string{"wsl-gpu-hook.dev/gpu=amd", "wsl-gpu-hook.dev/gpu=0"}, rocm, map[string]string{"HSA_ENABLE_DXG_DETECTION": "1"}, nil},
		{"AMD without librocdxg", amdDesktop, vendorstack.Host{}, []string{"amd.com/gpu=all"}, []string{"/usr/lib/wsl/lib"}, map[string]string{"HSA_ENABLE_DXG_DETECTION": ""}, nil},
		{"the Arc of two Intel GPUs", arcDesktop, fullStack, []string{"wsl-gpu-hook.dev/gpu=1"}, []string{"/usr/lib/wsl/lib"},
			map[string]string{"ZE_AFFINITY_MASK": "1", "MESA_D3D12_DEFAULT_ADAPTER_NAME": "Intel(R) Arc(TM) A770 Graphics", "HSA_ENABLE_DXG_DETECTION": ""}, nil},
		{"the Arc by LUID", arcDesktop, fullStack, []string{"wsl-gpu-hook.dev/gpu=0x12f3a"}, []string{"/usr/lib/wsl/lib"},
			map[string]string{"ZE_AFFINITY_MASK": "1"}, nil},
		{"both Intel GPUs: nothing to narrow", arcDesktop, fullStack, []string{"wsl-gpu-hook.dev/gpu=intel"}, []string{"/usr/lib/wsl/lib"},
			map[string]string{"ZE_AFFINITY_MASK": "", "MESA_D3D12_DEFAULT_ADAPTER_NAME": ""}, nil},
		{"video", arcDesktop, fullStack, []string{"wsl-gpu-hook.dev/gpu=all", "wsl-gpu-hook.dev/gpu=video"}, []string{"/usr/lib/wsl/lib"},
			map[string]string{"LIBVA_DRIVER_NAME": "d3d12"}, []string{"/dev/dxg", "/dev/dri/card0", "/dev/dri/renderD128"}},
		{"display", arcDesktop, fullStack, []string{"wsl-gpu-hook.dev/gpu=all", "wsl-gpu-hook.dev/gpu=display"},
			[]string{"/usr/lib/wsl/lib", "/tmp/.X11-unix", "/mnt/wslg/runtime-dir"},
			map[string]string{"DISPLAY": ":0", "WAYLAND_DISPLAY": "wayland-0", "XDG_RUNTIME_DIR": "/mnt/wslg/runtime-dir", "LIBVA_DRIVER_NAME": ""}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := injected(t, tt.inv, tt.stack, tt.devices...)
			// Engines order mounts by depth; compare the sets.
			got, want := mountTargets(spec), slices.Clone(tt.wantMounts)
			slices.Sort(got)
			slices.Sort(want)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("mounts %q, want %q", got, want)
			}
			for k, v := range tt.wantEnv {
				if got := envValue(spec, k); got != v {
					t.Errorf("%s=%q, want %q", k, got, v)
				}
			}
			if tt.wantNodes != nil {
				got = nil
				for _, d := range spec.Linux.Devices {
					got = append(got, d.Path)
					if strings.HasPrefix(d.Path, "/dev/dri/") && (d.FileMode == nil || *d.FileMode != 0o666) {
						t.Errorf("%s mode %v, want 0666", d.Path, d.FileMode)
					}
				}
				if !reflect.DeepEqual(got, tt.wantNodes) {
					t.Errorf("nodes %q, want %q", got, tt.wantNodes)
				}
				var rules []string
				for _, r := range spec.Linux.Resources.Devices {
					if r.Major != nil && *r.Major == 226 && r.Allow {
						rules = append(rules, r.Access)
					}
				}
				if !slices.Equal(rules, []string{"rw", "rw"}) {
					t.Errorf("cgroup rules for /dev/dri: %q, want two rw", rules)
				}
			}
			// The hook reads the selections back: no capability device may
			// add a variable it would misread.
			if _, err := cdiselect.FromEnv(spec.Process.Env); err != nil {
				t.Errorf("FromEnv: %v", err)
			}
		})
	}
}

func TestCapabilityDevicesNeedTheHost(t *testing.T) {
	o := opts
	o.Stack = vendorstack.Host{WSLg: vendorstack.WSLg{Dir: "/mnt/wslg", Display: -1}}
	specs, err := Generate(arcDesktop, o)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range specs[0].Devices {
		if d.Name == VideoDevice || d.Name == DisplayDevice {
			t.Errorf("device %s without /dev/dri or WSLg on the host", d.Name)
		}
	}
}

// writeSpecs writes the specs Generate makes for inv into a new directory,
// as install does, with /dev/null standing in for /dev/dxg: engines stat
// the node's host path, and every machine has /dev/null.
func writeSpecs(t *testing.T, inv *driverstore.Inventory, o Options) string {
	t.Helper()
	o.Device.Path = "/dev/null"
	specs, err := Generate(inv, o)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, s := range specs {
		data, err := Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, FileName(s.Kind)), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
