package dra

import (
	"context"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	dracel "k8s.io/dynamic-resource-allocation/cel"
)

// docs/kubernetes.md shows the selectors TestSelectors evaluates, as
// written.
func TestDocsSelectors(t *testing.T) {
	data, err := os.ReadFile("../../../docs/kubernetes.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := strings.Join(strings.Fields(string(data)), " ")
	for _, s := range selectors {
		if expr := strings.Join(strings.Fields(s.expr), " "); !strings.Contains(readme, expr) {
			t.Errorf("docs/kubernetes.md lacks the %s selector: %s", s.name, expr)
		}
	}
}

// The chart's "any WSL GPU" DeviceClass selects GPUs: not WARP, not an NPU,
// not AMD's Ryzen AI NPU, but an NVIDIA GPU in compute-only mode.
func TestChartGPUClass(t *testing.T) {
	data, err := os.ReadFile("../../../deploy/helm/wsl-gpu-hook/templates/dra.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("\\$gpu := `([^`]*)`").FindSubmatch(data)
	if m == nil {
		t.Fatal("no $gpu selector in the chart's dra.yaml")
	}
	prog := dracel.GetCompiler(dracel.Features{}).CompileCELExpression(string(m[1]), dracel.Options{})
	if prog.Error != nil {
		t.Fatal(prog.Error)
	}
	warp := inventory(t, "nvidia-laptop")
	warp.Adapters[0].Type |= 0x4 // software
	for _, tt := range []struct {
		profile string
		want    []string
	}{
		{"intel-npu", []string{"intel-7d55-0c111028-0"}},
		// Ryzen AI: the Radeon, not the XDNA NPU (AMD's own PCI id).
		{"ryzen-ai", []string{"amd-150e-1f631043-0"}},
		{"compute-only", []string{"nvidia-20b0-145010de-0"}},
		{"nvidia-laptop", []string{"intel-9a49-22d817aa-0", "nvidia-2520-3a5c17aa-0"}},
		{"warp", []string{"nvidia-2520-3a5c17aa-0"}},
	} {
		inv := warp
		if tt.profile != "warp" {
			inv = inventory(t, tt.profile)
		}
		var got []string
		for _, d := range Slice(Track(nil, inv, nil, t0), share) {
			ok, _, err := prog.DeviceMatches(context.Background(), dracel.Device{Driver: DriverName, Attributes: d.Attributes, Capacity: d.Capacity})
			if err != nil {
				t.Errorf("%s/%s: %v", tt.profile, d.Name, err)
			}
			if ok {
				got = append(got, d.Name)
			}
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("the GPU class on %s selects %v, want %v", tt.profile, got, tt.want)
		}
	}
}
