package deviceplugin

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/devnode"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/driverstore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/vendors"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/cdiselect"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/edits"
)

// Where the GPU appears inside every container, whatever the host paths.
const (
	ContainerDevice     = "/dev/dxg"
	ContainerLibDir     = driverstore.DefaultLibDir
	ContainerDriversDir = driverstore.DefaultDriversDir
)

// DeviceSpec is a device node for the container.
type DeviceSpec edits.KubeletDevice

// Mount is a read-only bind mount for the container.
type Mount edits.KubeletMount

// Response is the answer for one container: v1beta1's
// ContainerAllocateResponse without its types.
type Response struct {
	CDIDevices []string
	Devices    []DeviceSpec
	Mounts     []Mount
	Env        map[string]string
}

// AllocateError is a request the plan cannot serve.
type AllocateError struct {
	ID     string
	Reason string
}

func (e *AllocateError) Error() string { return fmt.Sprintf("device %s: %s", e.ID, e.Reason) }

// Allocate answers a container's request for device ids of resource: the
// union of the adapters behind them (replicas of one adapter count once),
// in host order. A device that is unknown, absent or unhealthy fails the
// whole request: a container must not start with fewer GPUs than it was
// given.
func (p *Plan) Allocate(resource string, ids []string, opt Options) (*Response, error) {
	if len(ids) == 0 {
		return nil, errors.New("allocate: no device IDs")
	}
	byID := map[string]Device{}
	for _, d := range p.For(resource) {
		byID[d.ID] = d
	}
	picked := map[int]Device{}
	for _, id := range ids {
		d, ok := byID[id]
		switch {
		case !ok:
			return nil, &AllocateError{ID: id, Reason: "not a " + resource + " device of this plugin"}
		case !d.Present || !d.Healthy:
			return nil, &AllocateError{ID: id, Reason: "unhealthy: " + d.Reason}
		}
		picked[d.Adapter.Index] = d
	}
	devs := make([]Device, 0, len(picked))
	for _, d := range picked {
		devs = append(devs, d)
	}
	sort.Slice(devs, func(i, j int) bool { return devs[i].Adapter.Index < devs[j].Adapter.Index })

	in := edits.Inputs{
		Device:     devnode.Node{Path: orDefault(opt.DxgDevice, ContainerDevice)},
		LibDir:     orDefault(opt.LibDir, driverstore.DefaultLibDir),
		DriversDir: orDefault(opt.DriversDir, driverstore.DefaultDriversDir),
		Spellings:  map[string]string{},
	}
	r := &Response{}
	folders := map[string]bool{}
	var luids []string
	if opt.CDI {
		r.CDIDevices = cdiDevices(p.Adapters, devs)
	}
	for _, d := range devs {
		luids = append(luids, d.Adapter.LUID.String())
		if f := d.Adapter.Folder; !folders[f] {
			folders[f] = true
			in.Folders = append(in.Folders, f)
			if reg := d.Adapter.Registry; reg != "" && reg != f {
				in.Spellings[f] = reg
			}
		}
	}
	e := edits.For(in)
	if opt.RequestEnv != "" {
		// LUIDs name the adapters exactly for this boot; the CDI devices'
		// hook, when the runtime has CDI, writes the loader files.
		e.Env = append(e.Env, opt.RequestEnv+"="+strings.Join(luids, ","))
	}
	a := e.Allocation()
	for _, d := range a.Devices {
		r.Devices = append(r.Devices, DeviceSpec(d))
	}
	for _, m := range a.Mounts {
		r.Mounts = append(r.Mounts, Mount(m))
	}
	r.Env = a.Env
	return r, nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// cdiDevices names the CDI devices that give a container devs. Each
// adapter's own device steers its vendor's runtime to that one adapter
// (ZE_AFFINITY_MASK, Mesa's adapter name), and the runtime keeps the last
// of several devices' values, so a container given two adapters by their
// own devices would be steered to one. Where the vendor's device for all
// its adapters (nvidia.com/gpu=all, amd.com/gpu=all,
// wsl-gpu-hook.dev/gpu=intel, wsl-gpu-hook.dev/gpu=qualcomm) selects exactly devs on this host, that one
// device is the answer: it steers nothing, and grants nothing more.
func cdiDevices(host []driverstore.Adapter, devs []Device) []string {
	names := make([]string, 0, len(devs))
	for _, d := range devs {
		names = append(names, d.CDIName())
	}
	if len(devs) < 2 {
		return names
	}
	v := devs[0].Adapter.Vendor
	sel := cdiselect.Selection{Vendor: v, Index: -1}
	// The vendor's own kind's "all", else our kind's device of the
	// vendor (the vendor table's CDI kinds, as cdispec writes them).
	var all string
	switch kind := vendors.RowOf(v).CDIKind; {
	case kind != "":
		all = kind + "=all"
	case v != driverstore.Microsoft && v != driverstore.Unknown:
		all = CDIKindGeneric + "=" + string(v)
	default:
		return names
	}
	picked, err := cdiselect.Union{Selections: []cdiselect.Selection{sel}}.Select(host)
	if err != nil || len(picked) != len(devs) {
		return names
	}
	for _, a := range picked {
		if !slices.ContainsFunc(devs, func(d Device) bool { return d.Adapter.Index == a.Index }) {
			return names
		}
	}
	return []string{all}
}
