package deviceplugin

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/driverstore"
)

// FeaturePrefix starts every feature name; node-feature-discovery's local
// source turns wsl-gpu-hook.present into the node label
// feature.node.kubernetes.io/wsl-gpu-hook.present.
const FeaturePrefix = "wsl-gpu-hook."

// DefaultFeatureFile is where node-feature-discovery's local source reads
// feature files on the node.
const DefaultFeatureFile = "/etc/kubernetes/node-feature-discovery/features.d/wsl-gpu-hook"

// Features returns the node-feature-discovery feature file for inv, one
// name=value line each, sorted: whether WSL GPUs are present, how many
// adapters (software ones left out), per vendor the count, the lowest WDDM
// version and whether one is compute-only (an MCDM adapter or NPU). Label
// values are what Kubernetes accepts: digits, dots, true/false.
func Features(inv *driverstore.Inventory) string {
	type vendorFacts struct {
		count       int
		wddm        uint32
		computeOnly bool
	}
	facts := map[driverstore.Vendor]*vendorFacts{}
	total, anyCompute := 0, false
	var minWDDM uint32
	if inv != nil {
		for _, a := range inv.Adapters {
			if a.Type.Software() {
				continue
			}
			total++
			f := facts[a.Vendor]
			if f == nil {
				f = &vendorFacts{wddm: a.WDDMVersion}
				facts[a.Vendor] = f
			}
			f.count++
			f.wddm = min(f.wddm, a.WDDMVersion)
			f.computeOnly = f.computeOnly || a.Type.ComputeOnly()
			anyCompute = anyCompute || a.Type.ComputeOnly()
			if minWDDM == 0 || a.WDDMVersion < minWDDM {
				minWDDM = a.WDDMVersion
			}
		}
	}
	lines := []string{
		"present=" + strconv.FormatBool(total > 0),
		"adapters=" + strconv.Itoa(total),
	}
	if total > 0 {
		lines = append(lines, "wddm="+wddm(minWDDM), "compute-only="+strconv.FormatBool(anyCompute))
	}
	var vendors []string
	for v, f := range facts {
		vendors = append(vendors, string(v))
		lines = append(lines,
			fmt.Sprintf("%s.count=%d", v, f.count),
			fmt.Sprintf("%s.wddm=%s", v, wddm(f.wddm)),
			fmt.Sprintf("%s.compute-only=%t", v, f.computeOnly))
	}
	sort.Strings(vendors)
	if len(vendors) > 0 {
		// A label value may not hold commas: vendors are joined with dots.
		lines = append(lines, "vendors="+strings.Join(vendors, "."))
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
func wddm(v uint32) string { return fmt.Sprintf("%d.%d", v/1000, v%1000/100) }
