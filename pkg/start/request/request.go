// Package request decides which GPU adapters a container asked for.
//
// A container asks through an annotation or an environment variable (the
// ones Docker's --gpus sets among them). The value is "all", one of the
// empty words ("none", "void", "", or unset: the hook then does nothing),
// or a comma-separated list of selectors: an adapter index as `info` prints
// it, a LUID ("0x4486d1"), or a vendor name.
//
// A selection decides which driver store folders a container gets. It cannot
// hide adapters from /dev/dxg itself: the paravirtual device exposes every
// adapter the Windows host gives the VM to whoever can open it.
package request

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/driverstore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/dxcore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/vendors"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/oci"
)

// Kind says what a selector names.
type Kind int

// Selector kinds.
const (
	ByIndex Kind = iota
	ByLUID
	ByVendor
	// ByVendorIndex is the Index-th of the adapters a ByVendor selector
	// of Vendor takes, in host order: what a vendor's CDI device
	// (amd.com/gpu=1) names. Requests cannot spell it; package
	// cdiselect's values can.
	ByVendorIndex
)

// vendorNames lists the vendors a selector may name: every vendor the hook
// tells apart, but not "unknown".
func vendorNames() []string {
	var out []string
	for _, v := range driverstore.Vendors() {
		if v != driverstore.Unknown {
			out = append(out, string(v))
		}
	}
	return out
}

// Selector is one item of a request list.
type Selector struct {
	Kind   Kind
	Index  int
	LUID   dxcore.LUID
	Vendor string
	Raw    string // as the user wrote it, for messages
}

// Selection is a parsed GPU request: the adapters a container asked for,
// as "all" or a list of selectors, and where it asked.
type Selection struct {
	All       bool
	Selectors []Selector
	// Source names where the request came from ("env NVIDIA_VISIBLE_DEVICES").
	Source string
	// NVIDIAIndexes says adapter indexes count NVIDIA adapters only, as
	// they do in NVIDIA_VISIBLE_DEVICES: Docker's --gpus 1 sets "0" and
	// means the first CUDA GPU, not an Intel iGPU enumerated before it.
	NVIDIAIndexes bool
}

// None reports a request for nothing: the hook must not touch the container.
func (r Selection) None() bool { return !r.All && len(r.Selectors) == 0 }

// Parse reads a request value.
func Parse(value string) (Selection, error) {
	v := strings.TrimSpace(value)
	switch strings.ToLower(v) {
	case "", "none", "void":
		return Selection{}, nil
	case "all":
		return Selection{All: true}, nil
	}
	var r Selection
	var errs []error
	for _, item := range strings.Split(v, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		if strings.EqualFold(item, "all") {
			return Selection{All: true}, nil
		}
		s, err := parseSelector(item)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		r.Selectors = append(r.Selectors, s)
	}
	if err := errors.Join(errs...); err != nil {
		return Selection{}, err
	}
	return r, nil
}

func parseSelector(item string) (Selector, error) {
	lower := strings.ToLower(item)
	for _, v := range vendorNames() {
		if lower == v {
			return Selector{Kind: ByVendor, Vendor: v, Raw: item}, nil
		}
	}
	if strings.HasPrefix(lower, "0x") {
		l, err := dxcore.ParseLUID(item)
		if err != nil {
			return Selector{}, fmt.Errorf("GPU selector %q: %w", item, err)
		}
		return Selector{Kind: ByLUID, LUID: l, Raw: item}, nil
	}
	if n, err := strconv.Atoi(item); err == nil && n >= 0 {
		return Selector{Kind: ByIndex, Index: n, Raw: item}, nil
	}
	if strings.HasPrefix(lower, "gpu-") || strings.HasPrefix(lower, "mig-") {
		return Selector{}, fmt.Errorf("GPU selector %q: GPU UUIDs do not exist on WSL: select by index, LUID or vendor (see wsl-gpu-hook info)", item)
	}
	return Selector{}, fmt.Errorf("GPU selector %q: want all, none, an adapter index, a LUID (0x...) or a vendor (%s)", item, strings.Join(vendorNames(), ", "))
}

// Target is what a selector is matched against.
type Target struct {
	Index  int
	LUID   dxcore.LUID
	Vendor string
	// Kind is what the adapter is for (driverstore.Adapter.Kind): a
	// vendor selector takes an NVIDIA's or AMD's GPUs only
	// (vendors.Selects), never AMD's Ryzen AI NPU.
	Kind vendors.Kind
	// VendorIndex is the adapter's position among the adapters a
	// selector of its vendor takes, in host order; -1 when that
	// selector does not take it. For NVIDIA it is the index
	// NVIDIA_VISIBLE_DEVICES counts.
	VendorIndex int
}

func (t Target) String() string { return fmt.Sprintf("%d %s %s", t.Index, t.Vendor, t.LUID) }

// Match reports whether s selects t; nvidiaIndexes is the request's
// NVIDIAIndexes.
func (s Selector) Match(t Target, nvidiaIndexes bool) bool {
	switch s.Kind {
	case ByIndex:
		if nvidiaIndexes {
			return t.Vendor == string(vendors.NVIDIA) && t.VendorIndex >= 0 && s.Index == t.VendorIndex
		}
		return s.Index == t.Index
	case ByLUID:
		return s.LUID == t.LUID
	case ByVendorIndex:
		return s.Vendor == t.Vendor && t.VendorIndex >= 0 && s.Index == t.VendorIndex
	default:
		return vendors.Selects(vendors.Name(s.Vendor), vendors.Name(t.Vendor), t.Kind)
	}
}

// NoMatchError is a request with selectors that match no adapter: each
// caller says what to do about it (its Error is a request's line).
type NoMatchError struct {
	Missing []string // the selectors, as written
	Have    []string // the host's adapters (Target.String), or "none"
}

func (e *NoMatchError) Error() string {
	return fmt.Sprintf("GPU selector %s matches no adapter on this host (adapters: %s): see wsl-gpu-hook info",
		strings.Join(e.Missing, ","), strings.Join(e.Have, "; "))
}

// Select returns the items the request selects, in host order: the one
// matcher of requests and CDI devices (package cdiselect). A selector that
// matches nothing is a *NoMatchError: silently giving a container fewer
// GPUs than it asked for is how NVIDIA's users lose hours.
func Select[T any](r Selection, items []T, target func(T) Target) ([]T, error) {
	if r.None() {
		return nil, nil
	}
	if r.All {
		return items, nil
	}
	used := make([]bool, len(r.Selectors))
	var out []T
	for _, it := range items {
		t := target(it)
		hit := false
		for i, s := range r.Selectors {
			if s.Match(t, r.NVIDIAIndexes) {
				used[i] = true
				hit = true
			}
		}
		if hit {
			out = append(out, it)
		}
	}
	var missing []string
	for i, u := range used {
		if !u {
			missing = append(missing, r.Selectors[i].Raw)
		}
	}
	if len(missing) > 0 {
		var have []string
		for _, it := range items {
			have = append(have, target(it).String())
		}
		if len(have) == 0 {
			have = []string{"none"}
		}
		return nil, &NoMatchError{Missing: missing, Have: have}
	}
	return out, nil
}

// FromSpec finds the request in a container's config: the annotation first,
// then each environment variable in order; the first one present decides,
// even when it says "none" (an explicit "void" must switch the hook off).
func FromSpec(spec *oci.Spec, envs []string, annotation string) (Selection, error) {
	raw, source := "", ""
	if v, ok := spec.Annotations[annotation]; ok && annotation != "" {
		raw, source = v, "annotation "+annotation
	} else {
		for _, e := range envs {
			if v, ok := spec.Env(e); ok {
				raw, source = v, "env "+e
				break
			}
		}
	}
	r, err := Parse(raw)
	if err != nil {
		return Selection{}, fmt.Errorf("%s: %w", source, err)
	}
	r.Source = source
	r.NVIDIAIndexes = source == "env NVIDIA_VISIBLE_DEVICES"
	return r, nil
}
