package dra

import (
	"fmt"
	"strings"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/driverstore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/dxcore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/adapterid"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/wsl"
)

// DriverName is the DRA driver's name: the domain of its attributes and
// capacities, and of its DeviceClasses' selectors.
const DriverName = wsl.DRADriver

// TaintKey marks a device the driver cannot prepare now; its value says
// why (one of the Reason constants).
const TaintKey = DriverName + "/unavailable"

// Reasons a device is unavailable: the taint's value.
const (
	ReasonGone          = "adapter-gone"   // the host no longer lists the adapter
	ReasonFolderMissing = "folder-missing" // its driver store folder is gone or refused
	ReasonNoHost        = "host-unlisted"  // the adapters could not be listed at all
)

// Device is one adapter as the driver publishes it.
type Device struct {
	// Name is the device's name in the pool, stable across WSL boots and
	// driver updates: <vendor>-<pci device>-<subsystem><subvendor>-<n>,
	// n counting identical adapters in host order.
	Name string
	// Adapter is the adapter as the host last listed it.
	Adapter driverstore.Adapter
	// Present: the host lists the adapter now.
	Present bool
	// Reason is "" for a device that can be prepared, else a Reason
	// constant, and Problem the one line that says why and what to do.
	Reason, Problem string
	// Since is when Reason was first seen: the taint's TimeAdded.
	Since time.Time
}

// Healthy reports whether a claim for the device can be prepared now.
func (d Device) Healthy() bool { return d.Reason == "" }

// Track is the device set after the host listed inv (listErr when it could
// not list at all): every adapter listed now, by its stable name, and every
// device of prev the host no longer lists, kept with Reason ReasonGone so
// that claims allocated to it fail with a reason rather than an unknown
// name, and so the scheduler sees the taint. A device that returns loses
// its taint. Devices come in host order, absent ones after.
func Track(prev []Device, inv *driverstore.Inventory, listErr error, now time.Time) []Device {
	old := map[string]Device{}
	for _, d := range prev {
		old[d.Name] = d
	}
	var out []Device
	seen := map[string]bool{}
	if listErr == nil && inv != nil {
		ids := adapterid.Of(inv.Adapters)
		for i, a := range inv.Adapters {
			d := Device{Name: ids[i].Name, Adapter: a, Present: true}
			if a.Err != nil {
				d.Reason, d.Problem = ReasonFolderMissing, a.Err.Error()
			}
			out = append(out, d)
			seen[d.Name] = true
		}
	}
	for _, p := range prev {
		if seen[p.Name] {
			continue
		}
		d := p
		d.Present = false
		if listErr != nil {
			d.Reason = ReasonNoHost
			d.Problem = fmt.Sprintf("device %s (LUID %s): the host's adapters cannot be listed: %v", d.Name, d.Adapter.LUID, listErr)
		} else {
			d.Reason = ReasonGone
			d.Problem = fmt.Sprintf("device %s (%s, LUID %s): the host no longer lists this adapter: it was removed or disabled in Windows, or WSL was restarted: reallocate the claim", d.Name, describe(d.Adapter), d.Adapter.LUID)
		}
		out = append(out, d)
	}
	for i := range out {
		d := &out[i]
		if o, ok := old[d.Name]; ok && o.Reason == d.Reason && d.Reason != "" {
			d.Since = o.Since
		} else if d.Reason != "" {
			d.Since = now
		}
	}
	return out
}

func describe(a driverstore.Adapter) string {
	if a.Description != "" {
		return a.Description
	}
	return string(a.Vendor)
}

// Lookup finds a device by name.
func Lookup(devs []Device, name string) (Device, bool) {
	for _, d := range devs {
		if d.Name == name {
			return d, true
		}
	}
	return Device{}, false
}

// Attribute names in the driver's domain, as CEL selectors read them:
// device.attributes["gpu.wsl-gpu-hook.dev"].vendor.
const (
	AttrVendor        = "vendor"
	AttrIndex         = "index"
	AttrLUID          = "luid"
	AttrDescription   = "description"
	AttrDriverVersion = "driverVersion"
	AttrFolder        = "driverStoreFolder"
	AttrWDDM          = "wddmVersion"
	AttrComputeOnly   = "computeOnly"
	AttrSoftware      = "software"
	AttrIntegrated    = "integrated"
	AttrPCIVendor     = "pciVendor"
	AttrPCIDevice     = "pciDevice"
	AttrACPIID        = "acpiID"
	// AttrKind is gpu, npu or software (package adapterid decides): what
	// the shipped DeviceClasses select on.
	AttrKind       = "kind"
	CapacityMemory = "memory"
)

// maxString is the API's limit on a string attribute's length.
const maxString = resourceapi.DeviceAttributeMaxValueLength

// Slice is what the driver publishes for devs: one API device each, with
// the attributes and capacity above, its memory shared under s and, for a
// device that cannot be prepared, a NoSchedule taint whose value is the
// reason.
func Slice(devs []Device, s Sharing) []resourceapi.Device {
	out := make([]resourceapi.Device, 0, len(devs))
	for _, d := range devs {
		out = append(out, apiDevice(d, s))
	}
	return out
}

func apiDevice(d Device, s Sharing) resourceapi.Device {
	a := d.Adapter
	attrs := map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
		AttrVendor:      {StringValue: ptr.To(string(a.Vendor))},
		AttrKind:        {StringValue: ptr.To(string(adapterid.KindOf(a)))},
		AttrIndex:       {IntValue: ptr.To(int64(a.Index))},
		AttrLUID:        {StringValue: ptr.To(a.LUID.String())},
		AttrComputeOnly: {BoolValue: ptr.To(a.Type.ComputeOnly())},
		AttrSoftware:    {BoolValue: ptr.To(a.Type.Software())},
		AttrPCIVendor:   {StringValue: ptr.To(adapterid.Hex(a.PCI.Vendor))},
		AttrPCIDevice:   {StringValue: ptr.To(adapterid.Hex(a.PCI.Device))},
	}
	if id := a.PCI.ACPIID(); id != "" {
		attrs[AttrACPIID] = resourceapi.DeviceAttribute{StringValue: ptr.To(id)}
	}
	setString := func(name resourceapi.QualifiedName, v string) {
		if v != "" {
			attrs[name] = resourceapi.DeviceAttribute{StringValue: ptr.To(truncate(v, maxString))}
		}
	}
	setString(AttrDescription, a.Description)
	setString(AttrDriverVersion, a.DriverVersion.String())
	// A folder name longer than the limit is not published cut: a
	// selector comparing it would match a name that does not exist.
	if f := a.Folder; f != "" && len(f) <= maxString {
		attrs[AttrFolder] = resourceapi.DeviceAttribute{StringValue: ptr.To(f)}
	}
	if v := WDDMVersion(a.WDDMVersion); v != "" {
		attrs[AttrWDDM] = resourceapi.DeviceAttribute{VersionValue: ptr.To(v)}
	}
	if v, ok := integrated(a); ok {
		attrs[AttrIntegrated] = resourceapi.DeviceAttribute{BoolValue: ptr.To(v)}
	}
	dev := resourceapi.Device{Name: d.Name, Attributes: attrs, Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{}}
	// Always published, 0 when the host does not say: a selector on
	// memory must not fail on a device without it.
	s.share(&dev, Memory(a))
	if d.Reason != "" {
		t := resourceapi.DeviceTaint{Key: TaintKey, Value: d.Reason, Effect: resourceapi.DeviceTaintEffectNoSchedule}
		if !d.Since.IsZero() {
			t.TimeAdded = &metav1.Time{Time: d.Since.Truncate(time.Second)}
		}
		dev.Taints = []resourceapi.DeviceTaint{t}
	}
	return dev
}

// WDDMVersion turns DRIVERVERSION's number (3000, 3100) into a semantic
// version CEL compares ("3.0.0", "3.1.0"); "" for 0.
func WDDMVersion(v uint32) string {
	if v == 0 {
		return ""
	}
	return dxcore.WDDM(v) + ".0"
}

// truncate cuts s to at most n bytes, dropping a rune cut in half.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "")
}
