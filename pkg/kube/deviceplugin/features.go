package deviceplugin

import (
	"sort"
	"strconv"
	"strings"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/driverstore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/dxcore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/adapterid"
)

// FeaturePrefix starts every feature name; node-feature-discovery's local
// source turns wsl-gpu-hook.present into the node label
// feature.node.kubernetes.io/wsl-gpu-hook.present.
const FeaturePrefix = "wsl-gpu-hook."

// DefaultFeatureFile is where node-feature-discovery's local source reads
// feature files on the node.
const DefaultFeatureFile = "/etc/kubernetes/node-feature-discovery/features.d/wsl-gpu-hook"

// Facts is what a node's adapters are, as its feature file and its labels
// (package nodelabels) both say it: one reading, two renderings.
type Facts struct {
	// Adapters counts the adapters, software ones left out.
	Adapters int
	// WDDM is the lowest WDDM version among them; ComputeOnly says
	// whether one is compute-only (an MCDM adapter or NPU).
	WDDM        uint32
	ComputeOnly bool
	Vendors     map[driverstore.Vendor]VendorFacts
}

// VendorFacts is Facts for one vendor's adapters.
type VendorFacts struct {
	Count       int
	WDDM        uint32
	ComputeOnly bool
	// Driver is the driver store folder of its first adapter that has
	// one.
	Driver string
}

// FactsOf reads inv (nil: no adapters can be listed).
func FactsOf(inv *driverstore.Inventory) Facts {
	f := Facts{Vendors: map[driverstore.Vendor]VendorFacts{}}
	if inv == nil {
		return f
	}
	for i, id := range adapterid.Of(inv.Adapters) {
		if id.Kind == adapterid.Software {
			continue
		}
		a := inv.Adapters[i]
		f.Adapters++
		v, ok := f.Vendors[a.Vendor]
		if !ok {
			v.WDDM = a.WDDMVersion
		}
		v.Count++
		v.WDDM = min(v.WDDM, a.WDDMVersion)
		v.ComputeOnly = v.ComputeOnly || a.Type.ComputeOnly()
		if v.Driver == "" {
			v.Driver = a.Folder
		}
		f.Vendors[a.Vendor] = v
		f.ComputeOnly = f.ComputeOnly || a.Type.ComputeOnly()
		if f.WDDM == 0 || a.WDDMVersion < f.WDDM {
			f.WDDM = a.WDDMVersion
		}
	}
	return f
}

// Values are the facts as feature names (without FeaturePrefix) and
// values, which Kubernetes accepts as label values: digits, dots,
// true/false. Driver folders are not among them: they are labels only.
func (f Facts) Values() map[string]string {
	out := map[string]string{
		"present":  strconv.FormatBool(f.Adapters > 0),
		"adapters": strconv.Itoa(f.Adapters),
	}
	if f.Adapters > 0 {
		out["wddm"] = wddm(f.WDDM)
		out["compute-only"] = strconv.FormatBool(f.ComputeOnly)
	}
	var vendors []string
	for v, vf := range f.Vendors {
		vendors = append(vendors, string(v))
		out[string(v)+".count"] = strconv.Itoa(vf.Count)
		out[string(v)+".wddm"] = wddm(vf.WDDM)
		out[string(v)+".compute-only"] = strconv.FormatBool(vf.ComputeOnly)
	}
	sort.Strings(vendors)
	if len(vendors) > 0 {
		// A label value may not hold commas: vendors are joined with dots.
		out["vendors"] = strings.Join(vendors, ".")
	}
	return out
}

// Features returns the node-feature-discovery feature file for inv, one
// name=value line each (Facts.Values), sorted.
func Features(inv *driverstore.Inventory) string {
	values := FactsOf(inv).Values()
	lines := make([]string, 0, len(values))
	for k, v := range values {
		lines = append(lines, k+"="+v)
	}
	sort.Strings(lines)
	var b strings.Builder
	b.WriteString("# Written by wsl-gpu-device-plugin; node-feature-discovery's local source reads it.\n")
	for _, l := range lines {
		b.WriteString(FeaturePrefix + l + "\n")
	}
	return b.String()
}

// wddm formats a DRIVERVERSION answer (3100) as a label value ("3.1").
func wddm(v uint32) string { return dxcore.WDDM(v) }
