package capability

import (
	"errors"
	"fmt"
	"strings"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/oci"
)

// Set is a set of capabilities.
type Set uint8

// Capabilities.
const (
	Compute Set = 1 << iota
	Graphics
	Video
	Display
)

// Default is what a request without capabilities gets.
const Default = Compute

// all is what the word "all" means: everything but display (see doc.go).
const all = Compute | Graphics | Video

// Where a container names its capabilities, in the order they are looked
// up; the first one present decides.
const (
	Annotation = "wsl-gpu-hook/capabilities"
	Env        = "WSL_GPU_CAPABILITIES"
	NVIDIAEnv  = "NVIDIA_DRIVER_CAPABILITIES"
)

var names = []struct {
	bit  Set
	name string
}{
	{Compute, "compute"},
	{Graphics, "graphics"},
	{Video, "video"},
	{Display, "display"},
}

// Has reports whether s holds every capability of c.
func (s Set) Has(c Set) bool { return s&c == c }

// String lists the capabilities by name, comma separated, in a fixed order.
func (s Set) String() string {
	var out []string
	for _, n := range names {
		if s&n.bit != 0 {
			out = append(out, n.name)
		}
	}
	return strings.Join(out, ",")
}

// Names lists every capability name Parse accepts besides "all" and
// "utility".
func Names() []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = n.name
	}
	return out
}

// words splits a comma-separated list, dropping blanks.
func words(v string) []string {
	var out []string
	for _, w := range strings.Split(v, ",") {
		if w = strings.ToLower(strings.TrimSpace(w)); w != "" {
			out = append(out, w)
		}
	}
	return out
}

func lookup(w string) (Set, bool) {
	switch w {
	case "all":
		return all, true
	case "utility":
		// NVIDIA's name for nvidia-smi and NVML: part of compute here.
		return Compute, true
	}
	for _, n := range names {
		if n.name == w {
			return n.bit, true
		}
	}
	return 0, false
}

// Parse reads the project's own syntax: a comma-separated list of
// compute, utility, graphics, video, display or all. Compute is always
// included. An unknown word is an error.
func Parse(v string) (Set, error) {
	s := Default
	var errs []error
	for _, w := range words(v) {
		c, ok := lookup(w)
		if !ok {
			errs = append(errs, fmt.Errorf("GPU capability %q: want all or a list of %s", w, strings.Join(Names(), ", ")))
			continue
		}
		s |= c
	}
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	return s, nil
}

// ParseNVIDIA reads NVIDIA_DRIVER_CAPABILITIES. Words this package does not
// serve are returned in ignored, in order; they are not errors.
func ParseNVIDIA(v string) (s Set, ignored []string) {
	s = Default
	for _, w := range words(v) {
		c, ok := lookup(w)
		if !ok {
			ignored = append(ignored, w)
			continue
		}
		s |= c
	}
	return s, ignored
}

// Choice is the capability set a container chose and where it said so.
type Choice struct {
	Set Set
	// Source names the annotation or variable that decided, "" when none
	// was present (Set is then Default).
	Source string
	// Ignored lists NVIDIA capability words this package does not serve.
	Ignored []string
}

// FromSpec finds the capabilities in a container's config: the annotation,
// then WSL_GPU_CAPABILITIES, then NVIDIA_DRIVER_CAPABILITIES. The first one
// present decides, even when it is empty (it then means Default).
func FromSpec(spec *oci.Spec) (Choice, error) {
	if v, ok := spec.Annotations[Annotation]; ok {
		s, err := Parse(v)
		if err != nil {
			return Choice{}, fmt.Errorf("annotation %s: %w", Annotation, err)
		}
		return Choice{Set: s, Source: "annotation " + Annotation}, nil
	}
	if v, ok := spec.Env(Env); ok {
		s, err := Parse(v)
		if err != nil {
			return Choice{}, fmt.Errorf("env %s: %w", Env, err)
		}
		return Choice{Set: s, Source: "env " + Env}, nil
	}
	if v, ok := spec.Env(NVIDIAEnv); ok {
		s, ignored := ParseNVIDIA(v)
		return Choice{Set: s, Source: "env " + NVIDIAEnv, Ignored: ignored}, nil
	}
	return Choice{Set: Default}, nil
}
