package cdiselect

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/driverstore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/dxcore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/request"
)

func TestParseSelection(t *testing.T) {
	good := []Selection{
		{All: true, Index: -1},
		{Vendor: driverstore.NVIDIA, Index: -1},
		{Vendor: driverstore.AMD, Index: 2},
		{Index: 0},
		{Index: 13},
		{LUID: dxcore.LUID{Low: 0x4486d1}, Index: -1},
		{LUID: dxcore.LUID{Low: 1, High: 2}, Index: -1},
	}
	for _, s := range good {
		got, err := ParseSelection(s.String())
		if err != nil || got != s {
			t.Errorf("ParseSelection(%q) = %+v, %v, want %+v", s.String(), got, err, s)
		}
	}
	for _, bad := range []string{
		"", "ALL", "nvidia", "vendor:", "vendor:nvidia:", "vendor:evil", "vendor:nvidia:-1",
		"vendor:nvidia:01", "vendor:nvidia:0:0", "index:", "index:x", "index:+1", "index:-1",
		"luid:", "luid:0x0", "luid:zz", "luid:0x1:2", "all:1", "index:99999999999999999999",
	} {
		if s, err := ParseSelection(bad); err == nil {
			t.Errorf("ParseSelection(%q) = %+v, want an error", bad, s)
		}
	}
}

func TestFromEnv(t *testing.T) {
	r, err := FromEnv([]string{
		"PATH=/bin", "WSL_GPU_CDI_NVIDIA_COM_GPU_0=vendor:nvidia:0",
		"WSL_GPU_CDI_X=index:3", "WSL_GPU_CDI_X=index:1", // last wins
		"WSL_GPU_DEVICES=all", "NOEQUALS",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"WSL_GPU_CDI_NVIDIA_COM_GPU_0=vendor:nvidia:0", "WSL_GPU_CDI_X=index:1"}
	if !reflect.DeepEqual(r.Vars, want) {
		t.Errorf("vars %v, want %v", r.Vars, want)
	}
	if len(r.Selections) != 2 || r.All() {
		t.Errorf("selections %+v", r.Selections)
	}
	if r, err := FromEnv([]string{"PATH=/bin"}); err != nil || len(r.Selections) != 0 {
		t.Errorf("no variables: %+v, %v", r, err)
	}
	_, err = FromEnv([]string{"WSL_GPU_CDI_A=index:0", "WSL_GPU_CDI_B=../../etc"})
	if err == nil || !strings.Contains(err.Error(), "env WSL_GPU_CDI_B") || !strings.Contains(err.Error(), "cdi generate") {
		t.Errorf("bad value: %v, want an error naming the variable and what to do", err)
	}
}

func TestFromArgs(t *testing.T) {
	r, err := FromArgs([]string{"vendor:nvidia:0", "index:1"})
	if err != nil {
		t.Fatal(err)
	}
	if got := []string{r.Selections[0].String(), r.Selections[1].String()}; len(r.Selections) != 2 || !reflect.DeepEqual(got, []string{"vendor:nvidia:0", "index:1"}) || r.All() {
		t.Errorf("selections %+v", r.Selections)
	}
	if r, err := FromArgs([]string{"all"}); err != nil || !r.All() {
		t.Errorf("all: %+v, %v", r, err)
	}
	if r, err := FromArgs(nil); err != nil || len(r.Selections) != 0 {
		t.Errorf("no arguments: %+v, %v", r, err)
	}
	_, err = FromArgs([]string{"all", "--config"})
	if err == nil || !strings.Contains(err.Error(), `selection "--config"`) || !strings.Contains(err.Error(), "cdi generate") {
		t.Errorf("bad argument: %v, want an error naming it and what to do", err)
	}
}

func TestSelect(t *testing.T) {
	// Host order: Intel 0, NVIDIA 1, NVIDIA 2 (folder missing), AMD 3.
	adapters := []driverstore.Adapter{
		adapter(0, driverstore.Intel, 0x10, "i"),
		adapter(1, driverstore.NVIDIA, 0x20, "n1"),
		{Adapter: dxcore.Adapter{Index: 2, LUID: dxcore.LUID{Low: 0x30}}, Vendor: driverstore.NVIDIA, Err: errors.New("missing")},
		adapter(3, driverstore.AMD, 0x40, "a"),
	}
	tests := []struct {
		sel     []string
		want    []int
		wantErr string
	}{
		{sel: []string{"all"}, want: []int{0, 1, 2, 3}},
		{sel: []string{"vendor:nvidia"}, want: []int{1, 2}},
		{sel: []string{"vendor:nvidia:0"}, want: []int{1}},
		{sel: []string{"vendor:nvidia:1"}, want: []int{2}},
		{sel: []string{"vendor:amd:0"}, want: []int{3}},
		{sel: []string{"index:0", "vendor:nvidia:0"}, want: []int{0, 1}},
		{sel: []string{"index:1", "vendor:nvidia:0"}, want: []int{1}}, // one adapter, named twice
		{sel: []string{"luid:0x40"}, want: []int{3}},
		{sel: []string{"vendor:nvidia:2"}, wantErr: "vendor:nvidia:2 matches no adapter"},
		{sel: []string{"index:4"}, wantErr: "run wsl-gpu-hook cdi generate"},
		{sel: []string{"luid:0x99", "index:0"}, wantErr: "luid:0x99 matches no adapter"},
		{sel: []string{"vendor:microsoft"}, wantErr: "vendor:microsoft matches no adapter"},
		{sel: []string{"vendor:qualcomm:0"}, wantErr: "vendor:qualcomm:0 matches no adapter"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.sel, ","), func(t *testing.T) {
			var r Union
			for _, s := range tt.sel {
				sel, err := ParseSelection(s)
				if err != nil {
					t.Fatal(err)
				}
				r.Selections = append(r.Selections, sel)
			}
			got, err := r.Select(adapters)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var idx []int
			for _, a := range got {
				idx = append(idx, a.Index)
			}
			if !reflect.DeepEqual(idx, tt.want) {
				t.Errorf("selected %v, want %v", idx, tt.want)
			}
		})
	}
}

func TestEnvName(t *testing.T) {
	for _, tt := range [][3]string{
		{"nvidia.com/gpu", "0", "WSL_GPU_CDI_NVIDIA_COM_GPU_0"},
		{"amd.com/gpu", "all", "WSL_GPU_CDI_AMD_COM_GPU_ALL"},
		{"wsl-gpu-hook.dev/gpu", "0x4486d1", "WSL_GPU_CDI_WSL_GPU_HOOK_DEV_GPU_0X4486D1"},
	} {
		if got := EnvName(tt[0], tt[1]); got != tt[2] {
			t.Errorf("EnvName(%s, %s) = %s, want %s", tt[0], tt[1], got, tt[2])
		}
	}
}

// TestToSelection: the request the hook's decision gets selects exactly the
// adapters Select picks, NVIDIA numbering included.
func TestToSelection(t *testing.T) {
	adapters := []driverstore.Adapter{
		adapter(0, driverstore.Intel, 0x10, "i"),
		adapter(1, driverstore.NVIDIA, 0x20, "n1"),
		adapter(2, driverstore.NVIDIA, 0x30, "n2"),
	}
	for _, sels := range [][]string{{"all"}, {"vendor:nvidia:1"}, {"vendor:nvidia:0", "index:0"}, {"luid:0x30"}, {"vendor:intel"}} {
		var r Union
		for _, s := range sels {
			sel, err := ParseSelection(s)
			if err != nil {
				t.Fatal(err)
			}
			r.Selections = append(r.Selections, sel)
		}
		want, err := r.Select(adapters)
		if err != nil {
			t.Fatal(err)
		}
		req, err := r.ToSelection(adapters)
		if err != nil {
			t.Fatal(err)
		}
		got, err := request.Adapters(req, adapters)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%v: the decision selects %v, Select %v", sels, got, want)
		}
	}
	var r Union
	sel, _ := ParseSelection("vendor:amd")
	r.Selections = []Selection{sel}
	if _, err := r.ToSelection(adapters); err == nil {
		t.Error("a selection of an absent vendor made a request")
	}
}

func adapter(index int, v driverstore.Vendor, luid uint32, folder string) driverstore.Adapter {
	return driverstore.Adapter{Adapter: dxcore.Adapter{Index: index, LUID: dxcore.LUID{Low: luid}}, Vendor: v, Folder: folder}
}
