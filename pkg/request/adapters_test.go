package request

import (
	"slices"
	"testing"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/driverstore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/dxcore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/oci"
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
		{Index: 0, LUID: dxcore.LUID{Low: 0x100}, Vendor: "intel", Kind: "gpu", NVIDIAIndex: -1},
		{Index: 1, LUID: dxcore.LUID{Low: 0x101}, Vendor: "nvidia", Kind: "gpu", NVIDIAIndex: 0},
		{Index: 2, LUID: dxcore.LUID{Low: 0x102}, Vendor: "microsoft", Kind: "gpu", NVIDIAIndex: -1},
		{Index: 3, LUID: dxcore.LUID{Low: 0x103}, Vendor: "nvidia", Kind: "gpu", NVIDIAIndex: 1},
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
