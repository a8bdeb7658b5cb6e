package deviceplugin

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/config"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/driverstore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/dxcore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/fixture"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/simhost"
)

// host is a simulated WSL host on disk: the lib dir and driver folders of
// a simhost profile (stand-ins for the ELF objects), so Build sees real
// stats.
type host struct {
	lib, drivers string
	adapters     []dxcore.Adapter
}

func newHost(t *testing.T, profile string) *host {
	t.Helper()
	p, err := simhost.Lookup(profile)
	if err != nil {
		t.Fatal(err)
	}
	dir := fixture.Host(t, profile, fixture.Options{Stubs: true})
	return &host{lib: filepath.Join(dir, fixture.LibDir), drivers: filepath.Join(dir, fixture.DriversDir), adapters: fixture.Adapters(p)}
}

func (h *host) inventory(t *testing.T) *driverstore.Inventory {
	t.Helper()
	inv, err := driverstore.Build(h.adapters, driverstore.Options{LibDir: h.lib, DriversDir: h.drivers})
	if err != nil {
		t.Fatal(err)
	}
	return inv
}

func (h *host) opts() Options {
	return Options{Resources: OptionsFrom(config.Default()).Resources, NPUResource: ResourceNPU, Replicas: 1, CDI: true, DxgDevice: "/sim/dxg", LibDir: h.lib, DriversDir: h.drivers, RequestEnv: "WSL_GPU_DEVICES"}
}

// summary is a plan as the kubelet sees it: resource, ID, health.
func summary(p *Plan) []string {
	var out []string
	for _, d := range p.Devices {
		h := "healthy"
		if !d.Healthy {
			h = "unhealthy"
		}
		out = append(out, d.Resource+" "+d.ID+" "+h)
	}
	return out
}

const (
	laptopIntel  = "gpu.intel.com/dxg intel-9a49-22d817aa-0"
	laptopNVIDIA = "nvidia.com/gpu nvidia-2520-3a5c17aa-0"
)

func TestBuildAdvertisesOneDevicePerAdapter(t *testing.T) {
	tests := []struct {
		profile string
		opt     func(*Options)
		want    []string
	}{
		{"nvidia-laptop", nil, []string{laptopIntel + " healthy", laptopNVIDIA + " healthy"}},
		{"amd-desktop", nil, []string{"amd.com/gpu amd-744c-0e3b1002-0 healthy"}},
		// The NPU is not a GPU: its own resource, never gpu.intel.com/dxg.
		// Its folder is named in upper case by the host: the ID is lower case.
		{"intel-npu", nil, []string{
			"gpu.intel.com/dxg intel-7d55-0c111028-0 healthy",
			"wsl-gpu-hook.dev/npu intel-7d1d-0c111028-0 healthy"}},
		{"intel-npu", func(o *Options) { o.NPUResource = "" }, []string{
			"gpu.intel.com/dxg intel-7d55-0c111028-0 healthy"}},
		// Windows on Arm: the Adreno under Qualcomm's resource, the
		// Hexagon NPU (compute-only) under the NPU resource; ACPI ids in
		// the IDs whole, the arm64 package name as the inf.
		{"snapdragon-x", nil, []string{
			"qualcomm.com/gpu qualcomm-36334330-00000000-0 healthy",
			"wsl-gpu-hook.dev/npu qualcomm-41304430-00000000-0 healthy"}},
		{"snapdragon-x", func(o *Options) { o.Resources[driverstore.Qualcomm] = "" }, []string{
			"wsl-gpu-hook.dev/npu qualcomm-41304430-00000000-0 healthy"}},
		// Ryzen AI: the Radeon iGPU (ATI's 0x1002) is the one amd.com/gpu,
		// the XDNA NPU (AMD's 0x1022, compute-only) an NPU.
		{"ryzen-ai", nil, []string{
			"amd.com/gpu amd-150e-1f631043-0 healthy",
			"wsl-gpu-hook.dev/npu amd-17f0-1f631043-0 healthy"}},
		{"no-gpu", nil, nil},
		{"nvidia-laptop", func(o *Options) { o.Resources[driverstore.Intel] = "" }, []string{laptopNVIDIA + " healthy"}},
		{"nvidia-laptop", func(o *Options) { o.Replicas = 2 }, []string{
			laptopIntel + "::0 healthy", laptopIntel + "::1 healthy", laptopNVIDIA + "::0 healthy", laptopNVIDIA + "::1 healthy"}},
		{"compute-only", func(o *Options) { o.Resources[driverstore.NVIDIA] = "example.com/cuda" }, []string{
			"example.com/cuda nvidia-20b0-145010de-0 healthy"}},
	}
	for _, tt := range tests {
		t.Run(tt.profile, func(t *testing.T) {
			h := newHost(t, tt.profile)
			opt := h.opts()
			if tt.opt != nil {
				tt.opt(&opt)
			}
			p := Build(h.inventory(t), nil, nil, opt)
			if got := summary(p); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("devices:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

// IDs must not follow what changes on every boot (LUID), on every driver
// update (the folder hash) or with other adapters coming and going (index).
func TestDeviceIDsAreStable(t *testing.T) {
	base := newHost(t, "nvidia-laptop")
	want := summary(Build(base.inventory(t), nil, nil, base.opts()))

	reboot := newHost(t, "nvidia-laptop")
	for i := range reboot.adapters {
		reboot.adapters[i].LUID = dxcore.LUID{Low: 0x9999 + uint32(i)}
	}
	update := newHost(t, "nvidia-laptop")
	nv := &update.adapters[1]
	nv.DriverStorePath = strings.Replace(nv.DriverStorePath, "7b2a5c1c4e6f8d90", "0123456789abcdef", 1)
	os.Rename(filepath.Join(update.drivers, "nvltwi.inf_amd64_7b2a5c1c4e6f8d90"), filepath.Join(update.drivers, "nvltwi.inf_amd64_0123456789abcdef"))
	reorder := newHost(t, "nvidia-laptop")
	reorder.adapters[0], reorder.adapters[1] = reorder.adapters[1], reorder.adapters[0]
	reorder.adapters[0].Index, reorder.adapters[1].Index = 0, 1

	for name, h := range map[string]*host{"reboot": reboot, "driver update": update, "other order": reorder} {
		if got := summary(Build(h.inventory(t), nil, nil, h.opts())); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: devices\n%s\nwant\n%s", name, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}

func TestIdenticalAdaptersGetOrdinals(t *testing.T) {
	h := newHost(t, "compute-only")
	twin := h.adapters[0]
	twin.Index, twin.LUID = 1, dxcore.LUID{Low: 0x77}
	h.adapters = append(h.adapters, twin)
	p := Build(h.inventory(t), nil, nil, h.opts())
	want := []string{
		"nvidia.com/gpu nvidia-20b0-145010de-0 healthy",
		"nvidia.com/gpu nvidia-20b0-145010de-1 healthy",
	}
	if got := summary(p); !reflect.DeepEqual(got, want) {
		t.Errorf("devices %q, want %q", got, want)
	}
	if p.Devices[1].Adapter.Index != 1 || p.Devices[1].CDIName() != "nvidia.com/gpu=1" {
		t.Errorf("second twin is adapter %d, %s; want adapter 1, nvidia.com/gpu=1", p.Devices[1].Adapter.Index, p.Devices[1].CDIName())
	}
}

func TestSoftwareAndMicrosoftAdapters(t *testing.T) {
	h := newHost(t, "amd-desktop")
	warp := h.adapters[0]
	warp.Index, warp.PCI = 1, dxcore.PCIIDs{Vendor: 0x1414, Device: 0x8c}
	warp.Type = dxcore.TypeSoftware | dxcore.TypeRender
	virt := warp
	virt.Index, virt.Type = 2, dxcore.TypeRender|dxcore.TypeParavirtualized
	h.adapters = append(h.adapters, warp, virt)
	p := Build(h.inventory(t), nil, nil, h.opts())
	want := []string{
		"amd.com/gpu amd-744c-0e3b1002-0 healthy",
		// The software adapter is never advertised but is counted in the
		// identity (the DRA driver names it too): the virtual adapter
		// with the same ids is the second.
		"wsl-gpu-hook.dev/dxg microsoft-008c-00000000-1 healthy",
	}
	if got := summary(p); !reflect.DeepEqual(got, want) {
		t.Errorf("devices\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if got := p.For("wsl-gpu-hook.dev/dxg")[0].CDIName(); got != "wsl-gpu-hook.dev/gpu=2" {
		t.Errorf("Microsoft adapter's CDI name %q, want wsl-gpu-hook.dev/gpu=2", got)
	}
}

// The health story the kubelet sees over time on one host.
func TestHealthFollowsTheHost(t *testing.T) {
	h := newHost(t, "nvidia-laptop")
	opt := h.opts()
	nvFolder := filepath.Join(h.drivers, "nvltwi.inf_amd64_7b2a5c1c4e6f8d90")
	nvidia := h.adapters[1]

	type step struct {
		name   string
		change func()
		inv    bool // list adapters; false: listing fails
		want   []string
		reason string // in the NVIDIA device's Reason
	}
	steps := []step{
		{"start", func() {}, true, []string{laptopIntel + " healthy", laptopNVIDIA + " healthy"}, ""},
		{"folder removed", func() { os.Rename(nvFolder, nvFolder+".gone") }, true,
			[]string{laptopIntel + " healthy", laptopNVIDIA + " unhealthy"}, "was not found under"},
		{"folder back", func() { os.Rename(nvFolder+".gone", nvFolder) }, true,
			[]string{laptopIntel + " healthy", laptopNVIDIA + " healthy"}, ""},
		{"adapter gone", func() { h.adapters = h.adapters[:1] }, true,
			[]string{laptopIntel + " healthy", laptopNVIDIA + " unhealthy"}, "no longer lists"},
		{"adapter back at another LUID", func() {
			nvidia.LUID = dxcore.LUID{Low: 0xabc}
			h.adapters = append(h.adapters, nvidia)
		}, true, []string{laptopIntel + " healthy", laptopNVIDIA + " healthy"}, ""},
		{"listing fails", func() {}, false, []string{laptopIntel + " unhealthy", laptopNVIDIA + " unhealthy"}, "cannot be listed"},
	}
	var p *Plan
	for _, s := range steps {
		s.change()
		var inv *driverstore.Inventory
		var err error = dxcore.ErrNoDevice
		if s.inv {
			inv, err = h.inventory(t), nil
		}
		p = Build(inv, err, p, opt)
		if got := summary(p); !reflect.DeepEqual(got, s.want) {
			t.Fatalf("%s: devices\n%s\nwant\n%s", s.name, strings.Join(got, "\n"), strings.Join(s.want, "\n"))
		}
		nv := p.For(ResourceNVIDIA)[0]
		if s.reason == "" && nv.Reason != "" || !strings.Contains(nv.Reason, s.reason) {
			t.Errorf("%s: reason %q, want it to say %q", s.name, nv.Reason, s.reason)
		}
		wantHealthy := 0
		if strings.HasSuffix(s.want[1], " healthy") {
			wantHealthy = 1
		}
		if got := p.Healthy(ResourceNVIDIA); got != wantHealthy {
			t.Errorf("%s: allocatable nvidia.com/gpu = %d, want %d", s.name, got, wantHealthy)
		}
	}
}

// A host with no /dev/dxg: nothing advertised, and the reason kept for the log.
func TestNoDeviceAtStart(t *testing.T) {
	p := Build(nil, dxcore.ErrNoDevice, nil, Options{Resources: OptionsFrom(config.Default()).Resources})
	if len(p.Devices) != 0 || len(p.Resources()) != 0 {
		t.Errorf("advertised %v with no /dev/dxg", summary(p))
	}
	if !strings.Contains(p.Problem, "not a WSL2 VM") {
		t.Errorf("Problem = %q, want the reason", p.Problem)
	}
	if p := Build(nil, nil, nil, Options{}); !strings.Contains(p.Problem, ErrNoInventory.Error()) {
		t.Errorf("nil inventory without error: Problem %q", p.Problem)
	}
}

func TestChanges(t *testing.T) {
	h := newHost(t, "nvidia-laptop")
	p1 := Build(h.inventory(t), nil, nil, h.opts())
	os.RemoveAll(filepath.Join(h.drivers, "nvltwi.inf_amd64_7b2a5c1c4e6f8d90"))
	p2 := Build(h.inventory(t), nil, p1, h.opts())
	got := p1.Changes(p2)
	if len(got) != 1 || !strings.HasPrefix(got[0], laptopNVIDIA+": unhealthy: adapter 1") {
		t.Errorf("changes %q, want one line for the NVIDIA device turning unhealthy", got)
	}
	if got := p2.Changes(p2); len(got) != 0 {
		t.Errorf("no change reported %q", got)
	}
}

// On a Ryzen AI host the kubelet gets one amd.com/gpu, the Radeon, whose
// CDI device is amd.com/gpu=0; the NPU's CDI device is ours, by index,
// never a second amd.com/gpu.
func TestRyzenAIOneAMDGPU(t *testing.T) {
	h := newHost(t, "ryzen-ai")
	p := Build(h.inventory(t), nil, nil, h.opts())
	var got []string
	for _, d := range p.Devices {
		got = append(got, d.Resource+" "+d.Adapter.Description+" "+d.CDIName())
	}
	want := []string{
		"amd.com/gpu AMD Radeon(TM) 890M Graphics amd.com/gpu=0",
		"wsl-gpu-hook.dev/npu NPU Compute Accelerator Device wsl-gpu-hook.dev/gpu=1",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("devices:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
