package vendorstack

import (
	"reflect"
	"strings"
	"testing"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/devnode"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/driverstore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/capability"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/edits"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/ldcache"
)

// Adapters as the simulated hosts report them (test/simhost).
var (
	iris   = Adapter{Index: 0, Vendor: driverstore.Intel, Description: "Intel(R) Iris(R) Xe Graphics"}
	rtx    = Adapter{Index: 1, Vendor: driverstore.NVIDIA, Description: "NVIDIA GeForce RTX 3060 Laptop GPU"}
	radeon = Adapter{Index: 0, Vendor: driverstore.AMD, Description: "AMD Radeon RX 7900 XTX"}
	arc    = Adapter{Index: 0, Vendor: driverstore.Intel, Description: "Intel(R) Arc(TM) Graphics"}
	npu    = Adapter{Index: 1, Vendor: driverstore.Intel, Description: "Intel(R) AI Boost", ComputeOnly: true}
	arc2   = Adapter{Index: 2, Vendor: driverstore.Intel, Description: "Intel(R) Arc(TM) A770 Graphics"}
	adreno = Adapter{Index: 0, Vendor: driverstore.Qualcomm, Description: "Qualcomm(R) Adreno(TM) X1-85 GPU", PCIVendor: 0x4D4F4351}
	// hexagon's description names the SoC, not the GPU: Mesa's substring
	// match cannot confuse the two.
	hexagon = Adapter{Index: 1, Vendor: driverstore.Qualcomm, Description: "Snapdragon(R) X Elite - X1E78100 - Qualcomm(R) Hexagon(TM) NPU", ComputeOnly: true, PCIVendor: 0x4D4F4351}
)

var (
	rocm   = ROCm{Dir: "/opt/rocm", Lib: "/opt/rocm/lib/librocdxg.so.1", Share: "/opt/rocm/share/rocdxg"}
	noROCm = ROCm{Dir: "/opt/rocm", Err: ErrNoRocdxg}
	dri    = []Node{{Name: "card0", HostPath: "/dev/dri/card0", Major: 226, Minor: 0}, {Name: "renderD128", HostPath: "/dev/dri/renderD128", Major: 226, Minor: 128}}
	wslg   = WSLg{Dir: "/mnt/wslg", X11: "/mnt/wslg/.X11-unix", Display: 0, RuntimeDir: "/mnt/wslg/runtime-dir", Wayland: "wayland-0", Pulse: "/mnt/wslg/PulseServer"}
)

func TestPlan(t *testing.T) {
	rocdxgMounts := []edits.Mount{
		{Source: rocm.Lib, Target: "/usr/lib/librocdxg.so.1", File: true},
		{Source: rocm.Lib, Target: "/usr/lib/librocdxg.so", File: true},
		{Source: rocm.Share, Target: "/usr/share/rocdxg"},
	}
	rocdxgCache := []ldcache.Entry{{Key: "librocdxg.so.1", Path: "/usr/lib/librocdxg.so.1", Flags: ldcache.FlagNative}}
	tests := []struct {
		name        string
		in          Input
		wantMounts  []edits.Mount
		wantDevices []edits.Device
		wantEnv     []string
		wantCache   []ldcache.Entry
		wantNotes   []string // substrings, one per note
	}{
		{
			name: "nvidia compute only: nothing beyond the folders",
			in:   Input{Host: []Adapter{iris, rtx}, Selected: []Adapter{rtx}, Caps: capability.Compute},
		},
		{
			name:       "amd compute with librocdxg",
			in:         Input{Host: []Adapter{radeon}, Selected: []Adapter{radeon}, All: true, Caps: capability.Compute, Probe: Host{ROCm: rocm}},
			wantMounts: rocdxgMounts,
			wantEnv:    []string{"HSA_ENABLE_DXG_DETECTION=1"},
			wantCache:  rocdxgCache,
		},
		{
			name: "amd without dids.conf still gets the library",
			in: Input{Host: []Adapter{radeon}, Selected: []Adapter{radeon}, Caps: capability.Compute,
				Probe: Host{ROCm: ROCm{Dir: "/opt/rocm", Lib: rocm.Lib}}},
			wantMounts: rocdxgMounts[:2],
			wantEnv:    []string{"HSA_ENABLE_DXG_DETECTION=1"},
			wantCache:  rocdxgCache,
			wantNotes:  []string{"no /opt/rocm/share/rocdxg/dids.conf on the host"},
		},
		{
			name:      "amd without librocdxg: a note, no variable",
			in:        Input{Host: []Adapter{radeon}, Selected: []Adapter{radeon}, Caps: capability.Compute, Probe: Host{ROCm: noROCm}},
			wantNotes: []string{"an AMD adapter is selected but there is no librocdxg at /opt/rocm/lib/librocdxg.so.1: ROCm in the container cannot use the GPU: install ROCm 7.1+"},
		},
		{
			name: "amd npu is not a ROCm device",
			in: Input{Host: []Adapter{{Index: 0, Vendor: driverstore.AMD, Description: "AMD NPU", ComputeOnly: true}},
				Selected: []Adapter{{Index: 0, Vendor: driverstore.AMD, Description: "AMD NPU", ComputeOnly: true}}, Caps: capability.Compute, Probe: Host{ROCm: noROCm}},
		},
		{
			name: "intel gpu selected on a laptop with one intel gpu: nothing to narrow",
			in:   Input{Host: []Adapter{iris, rtx}, Selected: []Adapter{iris}, Caps: capability.Compute},
		},
		{
			name:    "second intel gpu selected: mask counts intel gpus only",
			in:      Input{Host: []Adapter{arc, npu, arc2}, Selected: []Adapter{arc2}, Caps: capability.Compute},
			wantEnv: []string{"ZE_AFFINITY_MASK=1"},
		},
		{
			name:    "first intel gpu and the npu selected",
			in:      Input{Host: []Adapter{arc, npu, arc2}, Selected: []Adapter{arc, npu}, Caps: capability.Compute},
			wantEnv: []string{"ZE_AFFINITY_MASK=0"},
		},
		{
			name: "all intel gpus selected by index: no mask",
			in:   Input{Host: []Adapter{arc, npu, arc2}, Selected: []Adapter{arc, arc2}, Caps: capability.Compute},
		},
		{
			name: "request all: no selection variables",
			in:   Input{Host: []Adapter{arc, npu, arc2}, Selected: []Adapter{arc, npu, arc2}, All: true, Caps: capability.Compute | capability.Graphics},
		},
		{
			name:    "graphics on the nvidia gpu of a laptop",
			in:      Input{Host: []Adapter{iris, rtx}, Selected: []Adapter{rtx}, Caps: capability.Compute | capability.Graphics},
			wantEnv: []string{"MESA_D3D12_DEFAULT_ADAPTER_NAME=NVIDIA GeForce RTX 3060 Laptop GPU"},
		},
		{
			// Windows on Arm: D3D12 through Mesa is the Adreno's whole
			// stack; no ROCm, no Level Zero mask for Qualcomm.
			name:    "graphics on a snapdragon, vendor qualcomm selected: Mesa on the Adreno, never the NPU",
			in:      Input{Host: []Adapter{adreno, hexagon}, Selected: []Adapter{adreno, hexagon}, Caps: capability.Compute | capability.Graphics, Probe: Host{ROCm: noROCm}},
			wantEnv: []string{"MESA_D3D12_DEFAULT_ADAPTER_NAME=Qualcomm(R) Adreno(TM) X1-85 GPU"},
		},
		{
			name: "compute on a snapdragon: nothing beyond the folders",
			in:   Input{Host: []Adapter{adreno, hexagon}, Selected: []Adapter{adreno, hexagon}, Caps: capability.Compute, Probe: Host{ROCm: noROCm}},
		},
		{
			name:      "graphics on the hexagon npu alone",
			in:        Input{Host: []Adapter{adreno, hexagon}, Selected: []Adapter{hexagon}, Caps: capability.Compute | capability.Graphics},
			wantNotes: []string{"all are compute-only"},
		},
		{
			name:      "graphics on the npu alone",
			in:        Input{Host: []Adapter{arc, npu}, Selected: []Adapter{npu}, Caps: capability.Compute | capability.Graphics},
			wantNotes: []string{"all are compute-only"},
		},
		{
			name: "graphics without a description",
			in: Input{Host: []Adapter{{Index: 0, Vendor: driverstore.NVIDIA}}, Selected: []Adapter{{Index: 0, Vendor: driverstore.NVIDIA}},
				Caps: capability.Compute | capability.Graphics},
			wantNotes: []string{"the host gave no description for adapter 0 (nvidia)"},
		},
		{
			name: "graphics with a description another adapter contains",
			in: Input{Host: []Adapter{arc2, {Index: 3, Vendor: driverstore.Intel, Description: "Intel(R) Arc(TM) A770 Graphics (2)"}},
				Selected: []Adapter{arc2}, Caps: capability.Compute | capability.Graphics},
			wantEnv:   []string{"ZE_AFFINITY_MASK=0"},
			wantNotes: []string{"adapter 2 (Intel(R) Arc(TM) A770 Graphics) and adapter 3 have descriptions Mesa cannot tell apart"},
		},
		{
			name: "video on the amd desktop",
			in: Input{Host: []Adapter{radeon}, Selected: []Adapter{radeon}, Caps: capability.Compute | capability.Video,
				Probe: Host{ROCm: rocm, DRI: dri}},
			wantMounts: rocdxgMounts,
			wantDevices: []edits.Device{{Path: "/dev/dri/card0", Node: devnode.Node{Path: "/dev/dri/card0", Major: 226, Minor: 0}, Access: edits.AccessStack},
				{Path: "/dev/dri/renderD128", Node: devnode.Node{Path: "/dev/dri/renderD128", Major: 226, Minor: 128}, Access: edits.AccessStack}},
			wantEnv:   []string{"HSA_ENABLE_DXG_DETECTION=1", "MESA_D3D12_DEFAULT_ADAPTER_NAME=AMD Radeon RX 7900 XTX", "LIBVA_DRIVER_NAME=d3d12"},
			wantCache: rocdxgCache,
		},
		{
			name:      "video without /dev/dri",
			in:        Input{Host: []Adapter{iris, rtx}, Selected: []Adapter{iris, rtx}, All: true, Caps: capability.Compute | capability.Video},
			wantEnv:   []string{"LIBVA_DRIVER_NAME=d3d12"},
			wantNotes: []string{"video: the host has no /dev/dri card or render node"},
		},
		{
			name: "display with every WSLg socket",
			in:   Input{Host: []Adapter{iris, rtx}, Selected: []Adapter{iris, rtx}, All: true, Caps: capability.Compute | capability.Display, Probe: Host{WSLg: wslg}},
			wantMounts: []edits.Mount{
				{Source: "/mnt/wslg/.X11-unix", Target: "/tmp/.X11-unix"},
				{Source: "/mnt/wslg/runtime-dir", Target: "/mnt/wslg/runtime-dir"},
				{Source: "/mnt/wslg/PulseServer", Target: "/mnt/wslg/PulseServer", File: true},
			},
			wantEnv: []string{"DISPLAY=:0", "XDG_RUNTIME_DIR=/mnt/wslg/runtime-dir", "WAYLAND_DISPLAY=wayland-0", "PULSE_SERVER=unix:/mnt/wslg/PulseServer"},
		},
		{
			name:       "display with X11 only, on display 1",
			in:         Input{Host: []Adapter{rtx}, Selected: []Adapter{rtx}, All: true, Caps: capability.Compute | capability.Display, Probe: Host{WSLg: WSLg{Dir: "/mnt/wslg", X11: "/mnt/wslg/.X11-unix", Display: 1}}},
			wantMounts: []edits.Mount{{Source: "/mnt/wslg/.X11-unix", Target: "/tmp/.X11-unix"}},
			wantEnv:    []string{"DISPLAY=:1"},
		},
		{
			name:      "display without WSLg",
			in:        Input{Host: []Adapter{rtx}, Selected: []Adapter{rtx}, All: true, Caps: capability.Compute | capability.Display, Probe: Host{WSLg: WSLg{Dir: "/mnt/wslg", Display: -1}}},
			wantNotes: []string{"display: WSLg is not running (no sockets under /mnt/wslg)"},
		},
		{
			name: "no capability, no display even when WSLg runs",
			in:   Input{Host: []Adapter{rtx}, Selected: []Adapter{rtx}, All: true, Caps: capability.Compute, Probe: Host{WSLg: wslg, DRI: dri}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Plan(tt.in)
			if !reflect.DeepEqual(got.Mounts, tt.wantMounts) {
				t.Errorf("mounts = %+v\nwant %+v", got.Mounts, tt.wantMounts)
			}
			if !reflect.DeepEqual(got.Devices, tt.wantDevices) {
				t.Errorf("devices = %+v\nwant %+v", got.Devices, tt.wantDevices)
			}
			if env := got.EnvList(); !reflect.DeepEqual(env, orEmpty(tt.wantEnv)) {
				t.Errorf("env = %q\nwant %q", env, tt.wantEnv)
			}
			if !reflect.DeepEqual(got.Ldcache, tt.wantCache) {
				t.Errorf("ldcache = %+v\nwant %+v", got.Ldcache, tt.wantCache)
			}
			if len(got.Notes) != len(tt.wantNotes) {
				t.Fatalf("notes = %q\nwant %q", got.Notes, tt.wantNotes)
			}
			for i, n := range tt.wantNotes {
				if !strings.Contains(got.Notes[i], n) {
					t.Errorf("note %d = %q\nwant it to contain %q", i, got.Notes[i], n)
				}
			}
			if got.Empty() != (len(tt.wantMounts)+len(tt.wantDevices)+len(tt.wantEnv)+len(tt.wantCache) == 0) {
				t.Errorf("Empty() = %v", got.Empty())
			}
			for _, v := range got.Env {
				if v.Why == "" {
					t.Errorf("%s has no reason", v.Name)
				}
			}
		})
	}
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func TestNeeds(t *testing.T) {
	tests := []struct {
		sel                []Adapter
		caps               capability.Set
		rocm, dri, display bool
	}{
		{[]Adapter{rtx}, capability.Compute, false, false, false},
		{[]Adapter{iris, radeon}, capability.Compute, true, false, false},
		{[]Adapter{rtx}, capability.Compute | capability.Video | capability.Display, false, true, true},
		{[]Adapter{rtx}, capability.Compute | capability.Graphics, false, false, false},
	}
	for i, tt := range tests {
		r, d, w := Needs(tt.sel, tt.caps)
		if r != tt.rocm || d != tt.dri || w != tt.display {
			t.Errorf("%d: Needs = %v %v %v, want %v %v %v", i, r, d, w, tt.rocm, tt.dri, tt.display)
		}
	}
}

func TestMissing(t *testing.T) {
	tests := []struct {
		name string
		host []Adapter
		rocm ROCm
		want []string
	}{
		{"nvidia laptop", []Adapter{iris, rtx}, noROCm, nil},
		{"amd with librocdxg", []Adapter{radeon}, rocm, nil},
		{"amd without librocdxg", []Adapter{radeon}, noROCm, []string{
			"AMD adapter 0 (AMD Radeon RX 7900 XTX) is present but there is no librocdxg at /opt/rocm/lib/librocdxg.so.1: ROCm in the container cannot use the GPU: install ROCm 7.1+ and librocdxg on the WSL host, or set rocm_dir in the config"}},
		{"amd with an unreadable librocdxg", []Adapter{radeon}, ROCm{Dir: "/opt/rocm", Err: errString("/opt/rocm/lib/librocdxg.so.1.2.0 is not readable by everyone (mode 600)")}, []string{
			"AMD adapter 0 (AMD Radeon RX 7900 XTX) is present but librocdxg under /opt/rocm is unusable: /opt/rocm/lib/librocdxg.so.1.2.0 is not readable by everyone (mode 600): ROCm in the container cannot use the GPU: reinstall librocdxg (github.com/ROCm/librocdxg) readable by everyone"}},
	}
	for _, tt := range tests {
		if got := Missing(tt.host, tt.rocm); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: Missing = %q\nwant %q", tt.name, got, tt.want)
		}
	}
}

type errString string

func (e errString) Error() string { return string(e) }

func TestAdapterEnv(t *testing.T) {
	tests := []struct {
		name string
		host []Adapter
		a    Adapter
		want []string
	}{
		{"laptop nvidia gpu", []Adapter{iris, rtx}, rtx, []string{"MESA_D3D12_DEFAULT_ADAPTER_NAME=NVIDIA GeForce RTX 3060 Laptop GPU"}},
		{"laptop intel gpu: the only intel gpu", []Adapter{iris, rtx}, iris, []string{"MESA_D3D12_DEFAULT_ADAPTER_NAME=Intel(R) Iris(R) Xe Graphics"}},
		{"desktop with one gpu: nothing to choose", []Adapter{radeon}, radeon, nil},
		{"second intel gpu", []Adapter{arc, npu, arc2}, arc2, []string{"ZE_AFFINITY_MASK=1", "MESA_D3D12_DEFAULT_ADAPTER_NAME=Intel(R) Arc(TM) A770 Graphics"}},
		{"the npu", []Adapter{arc, npu, arc2}, npu, nil},
		{"snapdragon adreno: the only renderer", []Adapter{adreno, hexagon}, adreno, nil},
		{"snapdragon hexagon npu", []Adapter{adreno, hexagon}, hexagon, nil},
	}
	for _, tt := range tests {
		var got []string
		for _, v := range AdapterEnv(tt.host, tt.a) {
			got = append(got, v.String())
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: AdapterEnv = %q, want %q", tt.name, got, tt.want)
		}
	}
}

// An AMD NPU (PCI vendor 0x1022) is no ROCm device, even enumerated
// without details, when its compute-only type is unknown.
func TestAMDNPUWithoutDetails(t *testing.T) {
	npu := Adapter{Index: 0, Vendor: driverstore.AMD, PCIVendor: 0x1022}
	gpu := Adapter{Index: 1, Vendor: driverstore.AMD, PCIVendor: 0x1002}
	if rocm, _, _ := Needs([]Adapter{npu}, capability.Compute); rocm {
		t.Error("an AMD NPU needs ROCm")
	}
	if rocm, _, _ := Needs([]Adapter{npu, gpu}, capability.Compute); !rocm {
		t.Error("an AMD GPU needs no ROCm")
	}
	if m := Missing([]Adapter{npu}, noROCm); m != nil {
		t.Errorf("Missing for an NPU: %q", m)
	}
}

// PlanSelected plans the stacks of the selected adapters that have a
// usable folder only: a Radeon whose folder is gone gets no librocdxg.
func TestPlanSelectedKeepsTheUsable(t *testing.T) {
	ok := driverstore.Adapter{Vendor: driverstore.AMD}
	ok.PCI.Vendor = 0x1002
	gone := ok
	gone.Index, gone.Err = 1, errString("folder gone")
	in := Input{Caps: capability.Compute, Probe: Host{ROCm: rocm}}
	if e := PlanSelected([]driverstore.Adapter{ok, gone}, []driverstore.Adapter{gone}, in); !e.Empty() {
		t.Errorf("an adapter without its folder gets %+v", e)
	}
	if e := PlanSelected([]driverstore.Adapter{ok, gone}, []driverstore.Adapter{ok, gone}, in); len(e.Mounts) == 0 {
		t.Error("the usable Radeon gets no librocdxg")
	}
}
