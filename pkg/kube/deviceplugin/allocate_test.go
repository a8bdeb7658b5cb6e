package deviceplugin

import (
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/driverstore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/dxcore"
)

func TestCDIName(t *testing.T) {
	tests := []struct {
		vendor             driverstore.Vendor
		index, vendorIndex int
		want               string
	}{
		{driverstore.NVIDIA, 1, 0, "nvidia.com/gpu=0"},
		{driverstore.NVIDIA, 3, 2, "nvidia.com/gpu=2"},
		{driverstore.AMD, 2, 1, "amd.com/gpu=1"},
		{driverstore.Intel, 0, 0, "wsl-gpu-hook.dev/gpu=0"},
		{driverstore.Intel, 4, 1, "wsl-gpu-hook.dev/gpu=4"},
		{driverstore.Microsoft, 2, 0, "wsl-gpu-hook.dev/gpu=2"},
		{driverstore.Unknown, 5, 0, "wsl-gpu-hook.dev/gpu=5"},
	}
	for _, tt := range tests {
		if got := CDIName(tt.vendor, tt.index, tt.vendorIndex); got != tt.want {
			t.Errorf("CDIName(%s, %d, %d) = %q, want %q", tt.vendor, tt.index, tt.vendorIndex, got, tt.want)
		}
	}
}

func TestAllocate(t *testing.T) {
	h := newHost(t, "nvidia-laptop")
	nvFolder := "nvltwi.inf_amd64_7b2a5c1c4e6f8d90"
	intelFolder := "iigd_dch.inf_amd64_ba2ab4a3e0e0b2ea"
	nvID := "nvidia-2520-3a5c17aa-0"
	intelID := "intel-9a49-22d817aa-0"
	dev := []DeviceSpec{{HostPath: "/sim/dxg", ContainerPath: "/dev/dxg", Permissions: "rw"}}
	lib := Mount{HostPath: h.lib, ContainerPath: "/usr/lib/wsl/lib"}
	tests := []struct {
		name     string
		opt      func(*Options)
		resource string
		ids      []string
		want     *Response
	}{
		{"one NVIDIA GPU", nil, ResourceNVIDIA, []string{nvID}, &Response{
			CDIDevices: []string{"nvidia.com/gpu=0"},
			Devices:    dev,
			Mounts:     []Mount{lib, {HostPath: filepath.Join(h.drivers, nvFolder), ContainerPath: "/usr/lib/wsl/drivers/" + nvFolder}},
			Env:        map[string]string{"WSL_GPU_DEVICES": "0x4486d1"},
		}},
		{"Intel by adapter index", nil, ResourceIntel, []string{intelID}, &Response{
			CDIDevices: []string{"wsl-gpu-hook.dev/gpu=0"},
			Devices:    dev,
			Mounts:     []Mount{lib, {HostPath: filepath.Join(h.drivers, intelFolder), ContainerPath: "/usr/lib/wsl/drivers/" + intelFolder}},
			Env:        map[string]string{"WSL_GPU_DEVICES": "0x1a1d77"},
		}},
		{"CDI off, no request variable", func(o *Options) { o.CDI = false; o.RequestEnv = "" }, ResourceNVIDIA, []string{nvID}, &Response{
			Devices: dev,
			Mounts:  []Mount{lib, {HostPath: filepath.Join(h.drivers, nvFolder), ContainerPath: "/usr/lib/wsl/drivers/" + nvFolder}},
			Env:     map[string]string{},
		}},
		{"two replicas of one GPU are one GPU", func(o *Options) { o.Replicas = 3 }, ResourceNVIDIA, []string{nvID + "::2", nvID + "::0"}, &Response{
			CDIDevices: []string{"nvidia.com/gpu=0"},
			Devices:    dev,
			Mounts:     []Mount{lib, {HostPath: filepath.Join(h.drivers, nvFolder), ContainerPath: "/usr/lib/wsl/drivers/" + nvFolder}},
			Env:        map[string]string{"WSL_GPU_DEVICES": "0x4486d1"},
		}},
		{"default host paths", func(o *Options) { o.DxgDevice, o.LibDir, o.DriversDir = "", "", "" }, ResourceNVIDIA, []string{nvID}, &Response{
			CDIDevices: []string{"nvidia.com/gpu=0"},
			Devices:    []DeviceSpec{{HostPath: "/dev/dxg", ContainerPath: "/dev/dxg", Permissions: "rw"}},
			Mounts:     []Mount{{"/usr/lib/wsl/lib", "/usr/lib/wsl/lib"}, {"/usr/lib/wsl/drivers/" + nvFolder, "/usr/lib/wsl/drivers/" + nvFolder}},
			Env:        map[string]string{"WSL_GPU_DEVICES": "0x4486d1"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opt := h.opts()
			if tt.opt != nil {
				tt.opt(&opt)
			}
			p := Build(h.inventory(t), nil, nil, opt)
			got, err := p.Allocate(tt.resource, tt.ids, opt)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Allocate =\n%+v\nwant\n%+v", got, tt.want)
			}
		})
	}
}

func TestAllocateRefuses(t *testing.T) {
	h := newHost(t, "nvidia-laptop")
	opt := h.opts()
	nvID := "nvidia-2520-3a5c17aa-0"
	p := Build(h.inventory(t), nil, nil, opt)
	inv := h.inventory(t)
	inv.Adapters = inv.Adapters[:1]
	vanished := Build(inv, nil, p, opt)
	tests := []struct {
		name     string
		plan     *Plan
		resource string
		ids      []string
		want     string
	}{
		{"unknown ID", p, ResourceNVIDIA, []string{"nvidia-10de-0000-00000000-x-0"}, "not a nvidia.com/gpu device"},
		{"another resource's ID", p, ResourceIntel, []string{nvID}, "not a gpu.intel.com/dxg device"},
		{"vanished adapter", vanished, ResourceNVIDIA, []string{nvID}, "unhealthy: the host no longer lists"},
	}
	for _, tt := range tests {
		_, err := tt.plan.Allocate(tt.resource, tt.ids, opt)
		var ae *AllocateError
		if !errors.As(err, &ae) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err %v, want an AllocateError saying %q", tt.name, err, tt.want)
		}
	}
	if _, err := p.Allocate(ResourceNVIDIA, nil, opt); err == nil {
		t.Error("Allocate of no IDs succeeded")
	}
}

// TestAllocateSeveralAdapters: a container given several adapters of one
// vendor gets the vendor's device for all of them where that selects
// exactly those, so no adapter's own device steers Level Zero or Mesa to
// itself alone; otherwise each adapter's own device.
func TestAllocateSeveralAdapters(t *testing.T) {
	h := newHost(t, "intel-arc-desktop")
	opt := h.opts()
	p := Build(h.inventory(t), nil, nil, opt)
	var ids, names []string
	for _, d := range p.For(ResourceIntel) {
		ids, names = append(ids, d.ID), append(names, d.CDIName())
	}
	if len(ids) != 2 {
		t.Fatalf("intel-arc-desktop advertises %d Intel GPUs, want 2: %v", len(ids), summary(p))
	}
	for _, tt := range []struct {
		name string
		ids  []string
		want []string
	}{
		{"both Intel GPUs", ids, []string{"wsl-gpu-hook.dev/gpu=intel"}},
		{"one of them", ids[1:], names[1:]},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, err := p.Allocate(ResourceIntel, tt.ids, opt)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(r.CDIDevices, tt.want) {
				t.Errorf("CDI devices %q, want %q", r.CDIDevices, tt.want)
			}
		})
	}
}

func TestCDIDevices(t *testing.T) {
	adapter := func(i int, v driverstore.Vendor) driverstore.Adapter {
		return driverstore.Adapter{Adapter: dxcore.Adapter{Index: i}, Vendor: v}
	}
	dev := func(a driverstore.Adapter, vi int) Device {
		return Device{Adapter: a, VendorIndex: vi, Present: true}
	}
	nv0, nv1, in2, in3, npu4 := adapter(0, driverstore.NVIDIA), adapter(1, driverstore.NVIDIA), adapter(2, driverstore.Intel), adapter(3, driverstore.Intel), adapter(4, driverstore.Intel)
	qc0, qc1 := adapter(0, driverstore.Qualcomm), adapter(1, driverstore.Qualcomm)
	tests := []struct {
		name string
		host []driverstore.Adapter
		devs []Device
		want []string
	}{
		{"every NVIDIA adapter", []driverstore.Adapter{nv0, nv1, in2}, []Device{dev(nv0, 0), dev(nv1, 1)}, []string{"nvidia.com/gpu=all"}},
		{"one adapter", []driverstore.Adapter{nv0, nv1}, []Device{dev(nv1, 1)}, []string{"nvidia.com/gpu=1"}},
		// The NPU is Intel's too: the vendor's device would give it.
		{"an Intel adapter not asked for", []driverstore.Adapter{in2, in3, npu4}, []Device{dev(in2, 0), dev(in3, 1)}, []string{"wsl-gpu-hook.dev/gpu=2", "wsl-gpu-hook.dev/gpu=3"}},
		{"every Qualcomm adapter", []driverstore.Adapter{qc0, qc1}, []Device{dev(qc0, 0), dev(qc1, 1)}, []string{"wsl-gpu-hook.dev/gpu=qualcomm"}},
		{"no inventory", nil, []Device{dev(nv0, 0), dev(nv1, 1)}, []string{"nvidia.com/gpu=0", "nvidia.com/gpu=1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := cdiDevices(tt.host, tt.devs); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("cdiDevices = %q, want %q", got, tt.want)
			}
		})
	}
}
