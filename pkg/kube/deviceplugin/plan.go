package deviceplugin

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/driverstore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/adapterid"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/vendors"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/request"
)

// Default resource names, as existing manifests and charts ask for them
// (the vendor table's, package vendors).
const (
	ResourceNVIDIA   = vendors.ResourceNVIDIA
	ResourceAMD      = vendors.ResourceAMD
	ResourceIntel    = vendors.ResourceIntel
	ResourceQualcomm = vendors.ResourceQualcomm
	ResourceOther    = vendors.ResourceOther
)

// ResourceNPU is where compute-only accelerators that are not GPUs go
// (adapterid.KindOf): never under a GPU resource.
const ResourceNPU = vendors.NPUResource

// Options says how adapters become resources and what Allocate answers.
type Options struct {
	// Resources maps a vendor to its extended resource name; a vendor
	// missing or mapped to "" is not advertised. Microsoft and Unknown
	// adapters use the Unknown entry.
	Resources map[driverstore.Vendor]string
	// NPUResource is the resource NPUs (adapterid.NPU) are advertised under, of
	// whatever vendor; "" advertises none.
	NPUResource string
	// Replicas is how many devices each adapter is advertised as (>= 1).
	Replicas int
	// CDI puts CDI device names in Allocate answers.
	CDI bool
	// Host paths Allocate mounts; "" means the WSL default.
	DxgDevice, LibDir, DriversDir string
	// RequestEnv is the variable the hook reads a selection from; "" sets none.
	RequestEnv string
}

// resourceOf returns the resource adapter a is advertised under.
func (o Options) resourceOf(a driverstore.Adapter) string {
	if adapterid.KindOf(a) == adapterid.NPU {
		return o.NPUResource
	}
	v := a.Vendor
	if v == driverstore.Microsoft {
		v = driverstore.Unknown
	}
	return o.Resources[v]
}

// Device is one advertised device.
type Device struct {
	ID       string
	Resource string
	Healthy  bool
	// Reason says why the device is unhealthy; "" when healthy.
	Reason string
	// Present reports whether the host lists the adapter now; then
	// Adapter and VendorIndex describe it as of the last Build.
	Present     bool
	Adapter     driverstore.Adapter
	VendorIndex int // position among the GPUs of its vendor, host order
	Replica     int
}

// CDIName is the device's CDI name; "" when the adapter is not present.
func (d Device) CDIName() string {
	if !d.Present {
		return ""
	}
	if !vendors.Selects(d.Adapter.Vendor, d.Adapter.Vendor, d.Adapter.Kind()) {
		return CDIKindGeneric + "=" + strconv.Itoa(d.Adapter.Index)
	}
	return CDIName(d.Adapter.Vendor, d.Adapter.Index, d.VendorIndex)
}

// Plan is what the plugin advertises at one moment.
type Plan struct {
	Devices []Device // sorted by resource, then ID
	// Adapters are the host's adapters as listed for this plan, advertised
	// or not: what a CDI device selecting by vendor takes (cdiDevices).
	Adapters []driverstore.Adapter
	// Problem says why no adapter could be listed at all ("" if they could):
	// no /dev/dxg, a kernel without the ioctls, no adapters.
	Problem string
}

// ErrNoInventory marks a Build whose caller could not list adapters.
var ErrNoInventory = errors.New("no adapter inventory")

// Build decides what to advertise from inv, the adapters as the host
// lists them now (nil with listErr when they could not be listed), and
// prev, the last plan (nil at start). Devices in prev that are not in inv
// are kept, Unhealthy: the kubelet must see allocatable drop, not the
// device vanish. Adapters whose folder is unusable are Unhealthy with the
// folder's error as the reason.
func Build(inv *driverstore.Inventory, listErr error, prev *Plan, opt Options) *Plan {
	replicas := max(opt.Replicas, 1)
	p := &Plan{}
	seen := map[string]bool{}
	if inv == nil {
		if listErr == nil {
			listErr = ErrNoInventory
		}
		p.Problem = listErr.Error()
	} else {
		p.Adapters = inv.Adapters
		ids := adapterid.Of(inv.Adapters)
		// A vendor's CDI kind counts what its selection takes, as the
		// hook's matcher counts it (request.Targets).
		target := request.Targets(inv.Adapters)
		for i, a := range inv.Adapters {
			vi := target(a).VendorIndex
			res := opt.resourceOf(a)
			if res == "" || ids[i].Kind == adapterid.Software {
				continue
			}
			healthy, reason := true, ""
			if a.Err != nil {
				healthy, reason = false, a.Err.Error()
			}
			for r := range replicas {
				d := Device{ID: replicaID(ids[i].Name, r, replicas), Resource: res, Healthy: healthy, Reason: reason,
					Present: true, Adapter: a, VendorIndex: vi, Replica: r}
				seen[d.Resource+"\x00"+d.ID] = true
				p.Devices = append(p.Devices, d)
			}
		}
	}
	if prev != nil {
		for _, d := range prev.Devices {
			if seen[d.Resource+"\x00"+d.ID] {
				continue
			}
			d.Healthy, d.Present = false, false
			if inv == nil {
				d.Reason = "adapters cannot be listed: " + p.Problem
			} else {
				d.Reason = fmt.Sprintf("the host no longer lists this adapter (was %d, LUID %s)", d.Adapter.Index, d.Adapter.LUID)
			}
			p.Devices = append(p.Devices, d)
		}
	}
	sort.Slice(p.Devices, func(i, j int) bool {
		a, b := p.Devices[i], p.Devices[j]
		if a.Resource != b.Resource {
			return a.Resource < b.Resource
		}
		return a.ID < b.ID
	})
	return p
}

// Resources lists the resource names the plan advertises, sorted.
func (p *Plan) Resources() []string {
	var out []string
	for _, d := range p.Devices {
		if len(out) == 0 || out[len(out)-1] != d.Resource {
			out = append(out, d.Resource)
		}
	}
	return out
}

// For returns the devices of one resource.
func (p *Plan) For(resource string) []Device {
	var out []Device
	for _, d := range p.Devices {
		if d.Resource == resource {
			out = append(out, d)
		}
	}
	return out
}

// Healthy counts a resource's healthy devices: the node's allocatable.
func (p *Plan) Healthy(resource string) int {
	n := 0
	for _, d := range p.For(resource) {
		if d.Healthy {
			n++
		}
	}
	return n
}

// Changes describes, one line per device, how next differs from p in
// health: what the plugin logs on every re-enumeration that changed
// something.
func (p *Plan) Changes(next *Plan) []string {
	old := map[string]Device{}
	if p != nil {
		for _, d := range p.Devices {
			old[d.Resource+"\x00"+d.ID] = d
		}
	}
	var out []string
	for _, d := range next.Devices {
		o, ok := old[d.Resource+"\x00"+d.ID]
		switch {
		case !ok && d.Healthy:
			out = append(out, fmt.Sprintf("%s %s: new, healthy", d.Resource, d.ID))
		case !ok:
			out = append(out, fmt.Sprintf("%s %s: new, unhealthy: %s", d.Resource, d.ID, d.Reason))
		case o.Healthy && !d.Healthy:
			out = append(out, fmt.Sprintf("%s %s: unhealthy: %s", d.Resource, d.ID, d.Reason))
		case !o.Healthy && d.Healthy:
			out = append(out, fmt.Sprintf("%s %s: healthy again", d.Resource, d.ID))
		}
	}
	return out
}

// String lists the plan for `info --k8s`: one line per device.
func (p *Plan) String() string {
	var b strings.Builder
	for _, d := range p.Devices {
		state := "healthy"
		if !d.Healthy {
			state = "unhealthy: " + d.Reason
		}
		fmt.Fprintf(&b, "%s\t%s\t%s\t%s\n", d.Resource, d.ID, orDash(d.CDIName()), state)
	}
	return b.String()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
