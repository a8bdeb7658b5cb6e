package capability

import (
	"reflect"
	"strings"
	"testing"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/oci"
)

func TestParse(t *testing.T) {
	tests := []struct {
		in      string
		want    Set
		wantErr string
	}{
		{"", Compute, ""},
		{"compute", Compute, ""},
		{"compute,utility", Compute, ""},
		{"video", Compute | Video, ""},
		{" Graphics , VIDEO ", Compute | Graphics | Video, ""},
		{"display", Compute | Display, ""},
		// all is every GPU capability, never the desktop session.
		{"all", Compute | Graphics | Video, ""},
		{"all,display", Compute | Graphics | Video | Display, ""},
		{"video,,", Compute | Video, ""},
		{"vidoe", 0, `GPU capability "vidoe": want all or a list of compute, graphics, video, display`},
		{"ngx,video", 0, `GPU capability "ngx"`},
	}
	for _, tt := range tests {
		got, err := Parse(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Parse(%q) error = %v, want %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("Parse(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}

func TestParseNVIDIA(t *testing.T) {
	tests := []struct {
		in          string
		want        Set
		wantIgnored []string
	}{
		// What NVIDIA's CUDA images set.
		{"compute,utility", Compute, nil},
		// What Docker sets for --gpus 'all,"capabilities=compute,utility,graphics,video,display"'.
		{"compute,utility,graphics,video,display", Compute | Graphics | Video | Display, nil},
		{"all", Compute | Graphics | Video, nil},
		{"compat32,ngx,video", Compute | Video, []string{"compat32", "ngx"}},
		{"", Compute, nil},
	}
	for _, tt := range tests {
		got, ignored := ParseNVIDIA(tt.in)
		if got != tt.want || !reflect.DeepEqual(ignored, tt.wantIgnored) {
			t.Errorf("ParseNVIDIA(%q) = %v, %q; want %v, %q", tt.in, got, ignored, tt.want, tt.wantIgnored)
		}
	}
}

func TestString(t *testing.T) {
	if got := (Compute | Display | Video).String(); got != "compute,video,display" {
		t.Errorf("String = %q", got)
	}
	if !(Compute | Video).Has(Video) || (Compute | Video).Has(Video|Display) {
		t.Error("Has is wrong")
	}
}

func TestFromSpec(t *testing.T) {
	spec := func(ann map[string]string, env ...string) *oci.Spec {
		return &oci.Spec{Annotations: ann, Process: &oci.Process{Env: env}}
	}
	tests := []struct {
		name    string
		spec    *oci.Spec
		want    Choice
		wantErr string
	}{
		{"nothing", spec(nil, "PATH=/bin"), Choice{Set: Compute}, ""},
		{"no process", &oci.Spec{}, Choice{Set: Compute}, ""},
		{"nvidia", spec(nil, "NVIDIA_DRIVER_CAPABILITIES=compute,utility,video"),
			Choice{Set: Compute | Video, Source: "env NVIDIA_DRIVER_CAPABILITIES"}, ""},
		{"own env wins over nvidia", spec(nil, "NVIDIA_DRIVER_CAPABILITIES=all", "WSL_GPU_CAPABILITIES=compute"),
			Choice{Set: Compute, Source: "env WSL_GPU_CAPABILITIES"}, ""},
		{"annotation wins", spec(map[string]string{Annotation: "display"}, "WSL_GPU_CAPABILITIES=video"),
			Choice{Set: Compute | Display, Source: "annotation wsl-gpu-hook/capabilities"}, ""},
		{"empty annotation decides", spec(map[string]string{Annotation: ""}, "WSL_GPU_CAPABILITIES=video"),
			Choice{Set: Compute, Source: "annotation wsl-gpu-hook/capabilities"}, ""},
		{"last assignment wins", spec(nil, "WSL_GPU_CAPABILITIES=video", "WSL_GPU_CAPABILITIES=graphics"),
			Choice{Set: Compute | Graphics, Source: "env WSL_GPU_CAPABILITIES"}, ""},
		{"ignored nvidia words", spec(nil, "NVIDIA_DRIVER_CAPABILITIES=ngx"),
			Choice{Set: Compute, Source: "env NVIDIA_DRIVER_CAPABILITIES", Ignored: []string{"ngx"}}, ""},
		{"bad own env", spec(nil, "WSL_GPU_CAPABILITIES=gfx"), Choice{}, `env WSL_GPU_CAPABILITIES: GPU capability "gfx"`},
		{"bad annotation", spec(map[string]string{Annotation: "x"}), Choice{}, `annotation wsl-gpu-hook/capabilities: GPU capability "x"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := FromSpec(tt.spec)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("FromSpec = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}
