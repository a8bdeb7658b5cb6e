package request

import (
	"reflect"
	"testing"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/dxcore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/oci"
)

var laptop = []Target{
	{Index: 0, LUID: dxcore.LUID{Low: 0x1a1d77}, Vendor: "intel", VendorIndex: 0},
	{Index: 1, LUID: dxcore.LUID{Low: 0x4486d1}, Vendor: "nvidia", VendorIndex: 0},
}

// Docker's --gpus 1 and --gpus device=0 set NVIDIA_VISIBLE_DEVICES=0: the
// first NVIDIA GPU, even when an Intel iGPU comes first on the host.
func TestNVIDIAIndexes(t *testing.T) {
	spec := &oci.Spec{Process: &oci.Process{Env: []string{"NVIDIA_VISIBLE_DEVICES=0"}}}
	r, err := FromSpec(spec, []string{"WSL_GPU_DEVICES", "NVIDIA_VISIBLE_DEVICES"}, "")
	if err != nil {
		t.Fatal(err)
	}
	got, err := Select(r, laptop, self)
	if err != nil || len(got) != 1 || got[0].Vendor != "nvidia" {
		t.Fatalf("NVIDIA_VISIBLE_DEVICES=0 selected %v, %v; want the NVIDIA adapter", got, err)
	}
	spec.Process.Env = []string{"WSL_GPU_DEVICES=0"}
	r, _ = FromSpec(spec, []string{"WSL_GPU_DEVICES", "NVIDIA_VISIBLE_DEVICES"}, "")
	if got, _ := Select(r, laptop, self); len(got) != 1 || got[0].Vendor != "intel" {
		t.Fatalf("WSL_GPU_DEVICES=0 selected %v; want adapter 0 (intel)", got)
	}
	spec.Process.Env = []string{"NVIDIA_VISIBLE_DEVICES=1"}
	r, _ = FromSpec(spec, []string{"WSL_GPU_DEVICES", "NVIDIA_VISIBLE_DEVICES"}, "")
	if _, err := Select(r, laptop, self); err == nil {
		t.Fatal("NVIDIA_VISIBLE_DEVICES=1 on a one-NVIDIA-GPU host succeeded")
	}
}

func self(t Target) Target { return t }

func TestSelect(t *testing.T) {
	tests := []struct {
		value   string
		want    []int // indexes selected; nil = none
		wantErr string
	}{
		{value: "", want: nil},
		{value: "none", want: nil},
		{value: " VOID ", want: nil},
		{value: "all", want: []int{0, 1}},
		{value: "ALL", want: []int{0, 1}},
		{value: "0,all", want: []int{0, 1}},
		{value: "1", want: []int{1}},
		{value: "0,1", want: []int{0, 1}},
		{value: "nvidia", want: []int{1}},
		{value: "Intel", want: []int{0}},
		{value: "0x4486d1", want: []int{1}},
		{value: "intel, 0x4486d1", want: []int{0, 1}},
		{value: "1,1,nvidia", want: []int{1}},
		{value: "2", wantErr: "GPU selector 2 matches no adapter on this host (adapters: 0 intel 0x1a1d77; 1 nvidia 0x4486d1): see wsl-gpu-hook info"},
		{value: "qualcomm", wantErr: "GPU selector qualcomm matches no adapter on this host (adapters: 0 intel 0x1a1d77; 1 nvidia 0x4486d1): see wsl-gpu-hook info"},
		{value: "amd", wantErr: "GPU selector amd matches no adapter on this host (adapters: 0 intel 0x1a1d77; 1 nvidia 0x4486d1): see wsl-gpu-hook info"},
		{value: "GPU-8b1a8cbd-7f3e-4cf8-9e5c-0123456789ab", wantErr: `GPU selector "GPU-8b1a8cbd-7f3e-4cf8-9e5c-0123456789ab": GPU UUIDs do not exist on WSL: select by index, LUID or vendor (see wsl-gpu-hook info)`},
		{value: "-1", wantErr: `GPU selector "-1": want all, none, an adapter index, a LUID (0x...) or a vendor (nvidia, amd, intel, microsoft, qualcomm)`},
		{value: "gpu0", wantErr: `GPU selector "gpu0": want all, none, an adapter index, a LUID (0x...) or a vendor (nvidia, amd, intel, microsoft, qualcomm)`},
	}
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			r, err := Parse(tt.value)
			var got []Target
			if err == nil {
				got, err = Select(r, laptop, self)
			}
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("error = %v\nwant    %s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var idx []int
			for _, g := range got {
				idx = append(idx, g.Index)
			}
			if !reflect.DeepEqual(idx, tt.want) {
				t.Fatalf("selected %v, want %v", idx, tt.want)
			}
		})
	}
}

func TestFromSpec(t *testing.T) {
	envs := []string{"WSL_GPU_DEVICES", "NVIDIA_VISIBLE_DEVICES"}
	tests := []struct {
		name       string
		env        []string
		ann        map[string]string
		wantAll    bool
		wantNone   bool
		wantSource string
	}{
		{name: "nothing", wantNone: true},
		{name: "docker --gpus all", env: []string{"PATH=/bin", "NVIDIA_VISIBLE_DEVICES=all"}, wantAll: true, wantSource: "env NVIDIA_VISIBLE_DEVICES"},
		{name: "own variable first", env: []string{"NVIDIA_VISIBLE_DEVICES=all", "WSL_GPU_DEVICES=none"}, wantNone: true, wantSource: "env WSL_GPU_DEVICES"},
		{name: "last assignment wins", env: []string{"NVIDIA_VISIBLE_DEVICES=void", "NVIDIA_VISIBLE_DEVICES=all"}, wantAll: true, wantSource: "env NVIDIA_VISIBLE_DEVICES"},
		{name: "annotation wins", env: []string{"NVIDIA_VISIBLE_DEVICES=all"}, ann: map[string]string{"wsl-gpu-hook/devices": "void"}, wantNone: true, wantSource: "annotation wsl-gpu-hook/devices"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := &oci.Spec{Process: &oci.Process{Env: tt.env}, Annotations: tt.ann}
			r, err := FromSpec(spec, envs, "wsl-gpu-hook/devices")
			if err != nil {
				t.Fatal(err)
			}
			if r.All != tt.wantAll || r.None() != tt.wantNone || r.Source != tt.wantSource {
				t.Fatalf("got %+v (none=%v)", r, r.None())
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"all", "none", "0,1", "nvidia,0x4486d1", "GPU-abc", " , ,", "0x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := Parse(s)
		if err != nil {
			return
		}
		got, err := Select(r, laptop, self)
		if err != nil {
			return
		}
		if len(got) > len(laptop) {
			t.Fatalf("selected %d of %d adapters", len(got), len(laptop))
		}
	})
}
