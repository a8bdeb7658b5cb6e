package cdispec

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"

	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"
	"tags.cncf.io/container-device-interface/pkg/parser"
	cdi "tags.cncf.io/container-device-interface/specs-go"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/devnode"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/driverstore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/vendors"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/cdiselect"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/edits"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/request"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/vendorstack"
)

// Kinds the generator writes (package vendors holds them).
const (
	// Kind is our own: users write Kind + "=all", "=nvidia", "=0", "=0x4486d1".
	Kind = vendors.OwnCDIKind
	// NVIDIAKind is the name podman 5 and Docker 29.2+ turn --gpus into.
	NVIDIAKind = vendors.CDIKindNVIDIA
	// AMDKind is the name Docker 29.3+ turns --gpus into on AMD hosts.
	AMDKind = vendors.CDIKindAMD
)

// HookCommand is the hook's command word, after HookArgs.
const HookCommand = "cdi-hook"

// VendorKind is a vendor's own CDI kind and the vendor whose GPUs it names.
type VendorKind struct {
	Kind   string
	Vendor driverstore.Vendor
}

// VendorKinds maps each vendor kind to the vendor whose GPUs it names: the
// vendor table's CDI kinds, in its order.
var VendorKinds = vendorKinds()

func vendorKinds() []VendorKind {
	var out []VendorKind
	for _, r := range vendors.Rows() {
		if r.CDIKind != "" {
			out = append(out, VendorKind{Kind: r.CDIKind, Vendor: r.Name})
		}
	}
	return out
}

// Options is what the specs point at: nothing in it changes when Windows
// updates a driver.
type Options struct {
	// Device is the host's /dev/dxg; only its path is written.
	Device devnode.Node
	// LibDir is the host lib dir (its name is WSL's, not a driver's).
	LibDir string
	// HookPath and HookArgs run `wsl-gpu-hook [--config FILE] cdi-hook`
	// at createContainer: HookArgs is the argv before HookCommand.
	HookPath string
	HookArgs []string
	// SkipKinds lists vendor kinds not to write (another producer owns
	// them, see pkg/setup/cdiinstall).
	SkipKinds []string
	// Stack is what the host offers the vendor stacks and capabilities
	// (librocdxg, /dev/dri, WSLg): see stack.go.
	Stack vendorstack.Host
}

// Generate builds one spec per kind for the adapters in inv: our own kind
// always, a vendor kind when that vendor has an adapter. The specs name no
// driver store folder: each device has a createContainer hook of its own
// whose argument is its selection (cdiselect.Selection), resolved at every
// container start, so a driver update, which renames the folder, leaves
// the specs valid. Only a change in the set of adapters changes them.
func Generate(inv *driverstore.Inventory, opt Options) ([]*cdi.Spec, error) {
	if len(inv.Adapters) == 0 {
		return nil, errors.New("the host reports no GPU adapter: nothing to put in a CDI spec (see wsl-gpu-hook info)")
	}
	var specs []*cdi.Spec

	own := newSpec(Kind, opt)
	add := func(s *cdi.Spec, name string, sel cdiselect.Selection) {
		s.Devices = append(s.Devices, device(s.Kind, name, sel, inv, opt))
	}
	add(own, "all", cdiselect.Selection{All: true, Index: -1})
	seen := map[driverstore.Vendor]bool{}
	for _, a := range inv.Adapters {
		if !seen[a.Vendor] && vendors.Selects(a.Vendor, a.Vendor, a.Kind()) {
			seen[a.Vendor] = true
			add(own, string(a.Vendor), cdiselect.Selection{Vendor: a.Vendor, Index: -1})
		}
	}
	for _, a := range inv.Adapters {
		add(own, strconv.Itoa(a.Index), cdiselect.Selection{Index: a.Index})
	}
	// A LUID lives for one boot: these devices change the spec at every
	// boot, which the refresh unit rewrites. They serve tools that print
	// LUIDs (D3D12, DXCore, CUDA on WSL).
	for _, a := range inv.Adapters {
		if a.LUID.Uint64() != 0 {
			add(own, a.LUID.String(), cdiselect.Selection{LUID: a.LUID, Index: -1})
		}
	}
	own.Devices = append(own.Devices, capabilityDevices(opt.Stack)...)
	specs = append(specs, own)

	for _, vk := range VendorKinds {
		if !seen[vk.Vendor] || slices.Contains(opt.SkipKinds, vk.Kind) {
			continue
		}
		// A vendor kind names the vendor's GPUs only (vendors.Selects):
		// AMD's Ryzen AI NPU is no amd.com/gpu.
		s := newSpec(vk.Kind, opt)
		add(s, "all", cdiselect.Selection{Vendor: vk.Vendor, Index: -1})
		target := request.Targets(inv.Adapters)
		for _, a := range inv.Adapters {
			if n := target(a).VendorIndex; a.Vendor == vk.Vendor && n >= 0 {
				add(s, strconv.Itoa(n), cdiselect.Selection{Vendor: vk.Vendor, Index: n})
			}
		}
		specs = append(specs, s)
	}

	for _, s := range specs {
		if err := finish(s); err != nil {
			return nil, err
		}
	}
	return specs, nil
}

// finish sets the lowest CDI version that holds s and validates it.
func finish(s *cdi.Spec) error {
	v, err := cdi.MinimumRequiredVersion(s)
	if err != nil {
		return fmt.Errorf("CDI version: %w", err)
	}
	s.Version = v
	return Validate(s)
}

// newSpec has the edits every device of a kind shares: the node and the
// lib dir. Engines apply a spec's top-level edits once per container
// however many of its devices it gets.
func newSpec(kind string, opt Options) *cdi.Spec {
	shared := edits.Edits{
		Node:   edits.Device{Path: edits.ContainerDevice, Node: opt.Device, Access: edits.AccessDxg},
		Mounts: []edits.Mount{{Source: opt.LibDir, Target: edits.ContainerLibDir}},
		// Keeps the wsl-gpu-runtime wrapper, which reads the request
		// env before the container exists, from adding the GPU a
		// second time. The OCI hooks leave a container whose spec has
		// the node and the lib dir alone whatever the env says
		// (gpuplan.Skip), and the CDI hook skips folders already there.
		Env: []string{"WSL_GPU_DEVICES=void"},
	}
	return &cdi.Spec{Kind: kind, ContainerEdits: shared.CDI()}
}

// device is one device of kind: the variable that tells the container what
// it got, the hook that mounts it (which reads its argument, never the
// container's config) and its vendor stack's edits.
func device(kind, name string, sel cdiselect.Selection, inv *driverstore.Inventory, opt Options) cdi.Device {
	e := edits.Edits{
		Env:   []string{cdiselect.EnvName(kind, name) + "=" + sel.String()},
		Hooks: []edits.Hook{hook(opt, sel)},
	}
	e.AddStack(stackFor(inv, sel, opt.Stack), false)
	return cdi.Device{Name: name, ContainerEdits: e.CDI()}
}

// hook is a device's createContainer hook: `wsl-gpu-hook [--config FILE]
// cdi-hook SELECTION`. The selection travels as an argument because the
// hook cannot count on reading the container's config: in a container with
// a user namespace of its own (podman --userns, Docker's userns-remap, pods
// with hostUsers: false) it runs as the container's root, which the
// runtime's bundle does not admit. Each device the container gets runs its
// own hook; the second finds what the first mounted and adds only its own.
func hook(opt Options, sel cdiselect.Selection) edits.Hook {
	return edits.Hook{
		Stage: "createContainer", Path: opt.HookPath,
		Args: append(append([]string{}, opt.HookArgs...), HookCommand, sel.String()),
	}
}

// Validate checks what engines check when they load a spec.
func Validate(spec *cdi.Spec) error {
	var errs []error
	vendor, class := parser.ParseQualifier(spec.Kind)
	errs = append(errs, parser.ValidateVendorName(vendor), parser.ValidateClassName(class), cdi.ValidateVersion(spec))
	for _, d := range spec.Devices {
		errs = append(errs, parser.ValidateDeviceName(d.Name))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("generated CDI spec %s is invalid: %w", spec.Kind, err)
	}
	return nil
}

// FileName is the spec's file name in a CDI directory. Our kind gets the
// library's name for it (wsl-gpu-hook.dev-gpu.json); a vendor's kind gets
// the library's transient-style name with our name as the id
// (nvidia.com-gpu_wsl-gpu-hook.json), which says who wrote it and never
// collides with the vendor's own files (NVIDIA's nvidia.yaml).
func FileName(kind string) string {
	vendor, class := parser.ParseQualifier(kind)
	if kind == Kind {
		return cdiapi.GenerateSpecName(vendor, class) + ".json"
	}
	return cdiapi.GenerateTransientSpecName(vendor, class, "wsl-gpu-hook") + ".json"
}

// Marshal is the bytes every writer of a spec uses, so `cdi generate`, the
// boot unit and `install cdi` compare and write the same file.
func Marshal(spec *cdi.Spec) ([]byte, error) {
	data, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(data, '\n'), nil
}
