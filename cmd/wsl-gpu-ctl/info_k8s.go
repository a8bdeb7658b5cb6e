package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/gpuhost"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/usage/gpustats"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/config"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/kube/deviceplugin"
)

// k8sDevice is one row of `info --k8s --json`; field names are a stable interface.
type k8sDevice struct {
	Resource string `json:"resource"`
	ID       string `json:"id"`
	Adapter  int    `json:"adapter"`
	LUID     string `json:"luid"`
	CDIName  string `json:"cdiName"`
	Healthy  bool   `json:"healthy"`
	Reason   string `json:"reason,omitempty"`
}

// runInfoK8s prints what the device plugin would advertise on this host,
// from the same pure decisions the plugin makes.
func runInfoK8s(cfg config.Config, asJSON bool, stdout io.Writer) error {
	opt := deviceplugin.OptionsFrom(cfg)
	inv, err := gpuhost.List(cfg.DxgDevice, gpuhost.Options{LibDir: cfg.LibDir, DriversDir: cfg.DriversDir})
	if err == nil {
		_ = gpustats.MarkUnhealthy(inv, cfg.DxgDevice) // as the plugin does on every re-list
	}
	plan := deviceplugin.Build(inv, err, nil, opt)
	if plan.Problem != "" {
		return fmt.Errorf("info: %s", plan.Problem)
	}
	rows := []k8sDevice{}
	for _, d := range plan.Devices {
		rows = append(rows, k8sDevice{Resource: d.Resource, ID: d.ID, Adapter: d.Adapter.Index, LUID: d.Adapter.LUID.String(),
			CDIName: d.CDIName(), Healthy: d.Healthy, Reason: d.Reason})
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"devices": rows, "features": strings.Split(strings.TrimSpace(deviceplugin.Features(inv)), "\n")[1:]})
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RESOURCE\tDEVICE ID\tADAPTER\tCDI NAME\tHEALTH")
	for _, r := range rows {
		health := "healthy"
		if !r.Healthy {
			health = "unhealthy: " + r.Reason
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", r.Resource, r.ID, r.Adapter, r.CDIName, health)
	}
	tw.Flush()
	if len(rows) == 0 {
		fmt.Fprintln(stdout, "no adapter is advertised (software adapters never are; a vendor whose resource is \"\" is not)")
	}
	fmt.Fprintf(stdout, "replicas per adapter %d, CDI names in Allocate %t\n", opt.Replicas, opt.CDI)
	return nil
}
