package request

import (
	"errors"
	"slices"
	"testing"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/driverstore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/dxcore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/oci"
)

func adapter(index int, vendor driverstore.Vendor) driverstore.Adapter {
	return driverstore.Adapter{Adapter: dxcore.Adapter{Index: index, LUID: dxcore.LUID{Low: uint32(0x100 + index)}}, Vendor: vendor}
}

// A host with an Intel iGPU, an NVIDIA dGPU, WARP and a second NVIDIA dGPU:
// the NVIDIA numbering skips the others and counts from 0.
func TestTargets(t *testing.T) {
	host := []driverstore.Adapter{
		adapter(0, driverstore.Intel), adapter(1, driverstore.NVIDIA),
		adapter(2, driverstore.Microsoft), adapter(3, driverstore.NVIDIA),
	}
	target := Targets(host)
	want := []Target{
		{Index: 0, LUID: dxcore.LUID{Low: 0x100}, Vendor: "intel", Kind: "gpu", VendorIndex: 0},
		{Index: 1, LUID: dxcore.LUID{Low: 0x101}, Vendor: "nvidia", Kind: "gpu", VendorIndex: 0},
		{Index: 2, LUID: dxcore.LUID{Low: 0x102}, Vendor: "microsoft", Kind: "gpu", VendorIndex: 0},
		{Index: 3, LUID: dxcore.LUID{Low: 0x103}, Vendor: "nvidia", Kind: "gpu", VendorIndex: 1},
	}
	for i, a := range host {
		if got := target(a); got != want[i] {
			t.Errorf("adapter %d: target %+v, want %+v", a.Index, got, want[i])
		}
	}

	tests := []struct {
		env     string
		want    []int
		wantErr bool
	}{
		{env: "NVIDIA_VISIBLE_DEVICES=1", want: []int{3}},
		{env: "NVIDIA_VISIBLE_DEVICES=0,1", want: []int{1, 3}},
		{env: "NVIDIA_VISIBLE_DEVICES=2", wantErr: true},
		{env: "WSL_GPU_DEVICES=1", want: []int{1}},
		{env: "WSL_GPU_DEVICES=2", want: []int{2}},
		{env: "WSL_GPU_DEVICES=nvidia", want: []int{1, 3}},
	}
	for _, tt := range tests {
		t.Run(tt.env, func(t *testing.T) {
			r, err := FromSpec(specWithEnv(tt.env), []string{"WSL_GPU_DEVICES", "NVIDIA_VISIBLE_DEVICES"}, "")
			if err != nil {
				t.Fatal(err)
			}
			got, err := Adapters(r, host)
			if (err != nil) != tt.wantErr {
				t.Fatalf("Adapters error = %v, want error %v", err, tt.wantErr)
			}
			var idx []int
			for _, a := range got {
				idx = append(idx, a.Index)
			}
			if !slices.Equal(idx, tt.want) {
				t.Fatalf("Adapters selected %v, want %v", idx, tt.want)
			}
		})
	}
}

func specWithEnv(kv ...string) *oci.Spec {
	return &oci.Spec{Process: &oci.Process{Env: kv}}
}

// On a Ryzen AI host "amd" is the Radeon, not the XDNA NPU (AMD's own PCI
// id): the same adapters amd.com/gpu=all gives (package cdiselect).
func TestVendorAMDIsNotTheNPU(t *testing.T) {
	radeon, npu := adapter(0, driverstore.AMD), adapter(1, driverstore.AMD)
	radeon.PCI.Vendor, npu.PCI.Vendor, npu.Type = 0x1002, 0x1022, dxcore.TypeComputeOnly
	r, err := Parse("amd")
	if err != nil {
		t.Fatal(err)
	}
	got, err := Adapters(r, []driverstore.Adapter{radeon, npu})
	if err != nil || len(got) != 1 || got[0].Index != 0 {
		t.Errorf("amd selects %v (%v), want the Radeon (adapter 0) only", got, err)
	}
}

// amd.com/gpu=N counts AMD's GPUs, passing over the NPU, in the one
// matcher the hook and the CDI devices share.
func TestVendorIndexCountsWhatTheVendorSelectorTakes(t *testing.T) {
	radeon, npu, radeon2 := adapter(0, driverstore.AMD), adapter(1, driverstore.AMD), adapter(2, driverstore.AMD)
	radeon.PCI.Vendor, npu.PCI.Vendor, radeon2.PCI.Vendor, npu.Type = 0x1002, 0x1022, 0x1002, dxcore.TypeComputeOnly
	host := []driverstore.Adapter{radeon, npu, radeon2}
	target := Targets(host)
	var idx []int
	for _, a := range host {
		idx = append(idx, target(a).VendorIndex)
	}
	if !slices.Equal(idx, []int{0, -1, 1}) {
		t.Errorf("vendor indexes %v, want [0 -1 1]", idx)
	}
	for _, tt := range []struct {
		sel  Selector
		want []int
	}{
		{Selector{Kind: ByVendorIndex, Vendor: "amd", Index: 1, Raw: "vendor:amd:1"}, []int{2}},
		{Selector{Kind: ByVendor, Vendor: "amd", Raw: "amd"}, []int{0, 2}},
		{Selector{Kind: ByIndex, Index: 1, Raw: "1"}, []int{1}},
	} {
		got, err := Adapters(Selection{Selectors: []Selector{tt.sel}}, host)
		var gotIdx []int
		for _, a := range got {
			gotIdx = append(gotIdx, a.Index)
		}
		if err != nil || !slices.Equal(gotIdx, tt.want) {
			t.Errorf("%s selects %v (%v), want %v", tt.sel.Raw, gotIdx, err, tt.want)
		}
	}
	_, err := Adapters(Selection{Selectors: []Selector{{Kind: ByVendorIndex, Vendor: "amd", Index: 2, Raw: "vendor:amd:2"}}}, host)
	var nm *NoMatchError
	if !errors.As(err, &nm) || !slices.Equal(nm.Missing, []string{"vendor:amd:2"}) {
		t.Errorf("vendor:amd:2: %v, want a NoMatchError for it", err)
	}
}
