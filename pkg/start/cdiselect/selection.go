package cdiselect

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/driverstore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/dxcore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/request"
)

// EnvPrefix starts the name of every environment variable a device of ours
// adds. Each device adds its own variable (EnvName), so requesting several
// devices, from one spec or from several, leaves one variable per device
// in the container's environment: the engine merges env by name, and
// distinct names never overwrite each other.
const EnvPrefix = "WSL_GPU_CDI_"

// Selection is what one CDI device stands for, resolved against the host
// at every container start, never at generation time: a driver update
// renames folders but leaves the selection valid.
type Selection struct {
	// All selects every adapter.
	All bool
	// Vendor restricts the selection to one vendor's adapters, and for
	// a vendor with a CDI kind (amd.com/gpu) to its GPUs
	// (vendors.Selects): AMD's Ryzen AI NPU is never amd.com/gpu=N. ""
	// is any adapter.
	Vendor driverstore.Vendor
	// Index is the adapter's position among Vendor's adapters, as
	// NVIDIA_VISIBLE_DEVICES counts NVIDIA GPUs, or with Vendor "" its
	// index as `wsl-gpu-hook info` prints it; -1 selects every adapter
	// of Vendor.
	Index int
	// LUID, when not zero, selects the adapter with this LUID.
	LUID dxcore.LUID
}

// String encodes the selection as the value of its environment variable:
// "all", "vendor:nvidia", "vendor:nvidia:0", "index:1" or "luid:0x4486d1".
func (s Selection) String() string {
	switch {
	case s.All:
		return "all"
	case s.LUID != (dxcore.LUID{}):
		return "luid:" + s.LUID.String()
	case s.Vendor != "" && s.Index < 0:
		return "vendor:" + string(s.Vendor)
	case s.Vendor != "":
		return "vendor:" + string(s.Vendor) + ":" + strconv.Itoa(s.Index)
	}
	return "index:" + strconv.Itoa(s.Index)
}

// ParseSelection reads what String wrote. The value comes from the
// container's environment, which its user controls: anything else is an
// error, never a guess.
func ParseSelection(v string) (Selection, error) {
	fields := strings.Split(v, ":")
	bad := fmt.Errorf("selection %q: want all, vendor:NAME, vendor:NAME:N, index:N or luid:0xHEX", v)
	index := func(s string) (int, error) {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 || strconv.Itoa(n) != s {
			return 0, bad
		}
		return n, nil
	}
	switch {
	case len(fields) == 1 && fields[0] == "all":
		return Selection{All: true, Index: -1}, nil
	case fields[0] == "vendor" && (len(fields) == 2 || len(fields) == 3):
		vendor := driverstore.Vendor(fields[1])
		if !vendor.Known() {
			return Selection{}, bad
		}
		s := Selection{Vendor: vendor, Index: -1}
		if len(fields) == 3 {
			n, err := index(fields[2])
			if err != nil {
				return Selection{}, err
			}
			s.Index = n
		}
		return s, nil
	case fields[0] == "index" && len(fields) == 2:
		n, err := index(fields[1])
		if err != nil {
			return Selection{}, err
		}
		return Selection{Index: n}, nil
	case fields[0] == "luid" && len(fields) == 2:
		l, err := dxcore.ParseLUID(fields[1])
		if err != nil || l == (dxcore.LUID{}) {
			return Selection{}, bad
		}
		return Selection{LUID: l, Index: -1}, nil
	}
	return Selection{}, bad
}

// EnvName is the variable a device adds: EnvPrefix, then the kind and the
// device name upper-cased with every other character as "_", e.g.
// WSL_GPU_CDI_NVIDIA_COM_GPU_0. Device names are digits, vendor names,
// "all" and LUIDs, which this maps one to one.
func EnvName(kind, device string) string {
	var b strings.Builder
	b.WriteString(EnvPrefix)
	for _, r := range strings.ToUpper(kind + "_" + device) {
		if (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// Union is the union of the selections of the CDI devices a container
// got, as the hook finds them in its arguments (FromArgs) or, for a spec
// written before the hook took them so, in the container's environment
// (FromEnv).
type Union struct {
	// Vars are the selections found, "NAME=VALUE" from the environment,
	// sorted, or the arguments as given: for messages.
	Vars       []string
	Selections []Selection
}

// All reports whether some device selected every adapter.
func (r Union) All() bool {
	for _, s := range r.Selections {
		if s.All {
			return true
		}
	}
	return false
}

// FromArgs reads the selections a device's hook carries as its arguments
// (`cdi-hook vendor:nvidia:0`): each device of ours has its own hook, so the
// hook learns what the container asked for without reading the bundle's
// config.json, which a hook inside the container's own user namespace
// cannot read. The arguments come from the CDI spec, which root wrote: an
// argument that is not a selection means a damaged spec.
func FromArgs(args []string) (Union, error) {
	r := Union{Vars: args}
	for _, a := range args {
		s, err := ParseSelection(a)
		if err != nil {
			return Union{}, fmt.Errorf("hook argument: %w: the CDI spec is damaged: regenerate it with wsl-gpu-hook cdi generate", err)
		}
		r.Selections = append(r.Selections, s)
	}
	return r, nil
}

// FromEnv finds the selections in a container's environment ("NAME=VALUE"
// entries, as in config.json's process.env). A variable set twice counts
// once, with its last value, as the container's libc sees it.
func FromEnv(env []string) (Union, error) {
	last := map[string]string{}
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, EnvPrefix) {
			last[k] = v
		}
	}
	var r Union
	var errs []error
	for k, v := range last {
		r.Vars = append(r.Vars, k+"="+v)
	}
	sort.Strings(r.Vars)
	for _, kv := range r.Vars {
		k, v, _ := strings.Cut(kv, "=")
		s, err := ParseSelection(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("env %s: %w", k, err))
			continue
		}
		r.Selections = append(r.Selections, s)
	}
	if err := errors.Join(errs...); err != nil {
		return Union{}, fmt.Errorf("%w: the variable belongs to a wsl-gpu-hook CDI device: do not set it by hand, regenerate the spec with wsl-gpu-hook cdi generate", err)
	}
	return r, nil
}

// Selector is s as the request's matcher takes it (package request: one
// matcher for requests and CDI devices); not for All.
func (s Selection) Selector() request.Selector {
	raw := s.String()
	switch {
	case s.LUID != (dxcore.LUID{}):
		return request.Selector{Kind: request.ByLUID, LUID: s.LUID, Raw: raw}
	case s.Vendor != "" && s.Index < 0:
		return request.Selector{Kind: request.ByVendor, Vendor: string(s.Vendor), Raw: raw}
	case s.Vendor != "":
		return request.Selector{Kind: request.ByVendorIndex, Vendor: string(s.Vendor), Index: s.Index, Raw: raw}
	}
	return request.Selector{Kind: request.ByIndex, Index: s.Index, Raw: raw}
}

// Select returns the adapters the request selects, in host order, each once,
// by request.Select. A selection that matches no adapter is an error: the
// host's adapters changed since the spec was written, and a container must
// not start with fewer GPUs than it asked for.
func (r Union) Select(adapters []driverstore.Adapter) ([]driverstore.Adapter, error) {
	var req request.Selection
	for _, s := range r.Selections {
		if !s.All {
			req.Selectors = append(req.Selectors, s.Selector())
		}
	}
	picked, err := request.Adapters(req, adapters)
	var nm *request.NoMatchError
	if errors.As(err, &nm) {
		return nil, fmt.Errorf("CDI device selection %s matches no adapter on this host (adapters: %s): the adapters changed since the CDI spec was written: run wsl-gpu-hook cdi generate (or restart the wsl-gpu-hook-cdi unit)",
			strings.Join(nm.Missing, ","), strings.Join(nm.Have, "; "))
	}
	if err != nil {
		return nil, err
	}
	if r.All() {
		return adapters, nil
	}
	return picked, nil
}

// ToSelection turns the selections into the hook's request form for the
// adapters the host has now, so the hook's one decision (pkg/start/gpuplan)
// plans for exactly the adapters Select picks: every adapter by its host
// index, or All when a device asked for all.
func (r Union) ToSelection(adapters []driverstore.Adapter) (request.Selection, error) {
	out := request.Selection{Source: "CDI " + strings.Join(r.Vars, " ")}
	if r.All() {
		out.All = true
		return out, nil
	}
	selected, err := r.Select(adapters)
	if err != nil {
		return request.Selection{}, err
	}
	for _, a := range selected {
		out.Selectors = append(out.Selectors, request.Selector{Kind: request.ByIndex, Index: a.Index, Raw: strconv.Itoa(a.Index)})
	}
	return out, nil
}
