package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/config"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/driverstore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/dxcore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/adapterid"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/usage/gpustats"
)

// memoryColumn is the adapter's own memory, or the shared memory an
// integrated GPU maps, or "-" without the statistics calls.
func memoryColumn(a infoAdapter) string {
	switch {
	case a.LocalMemory > 0:
		return humanBytes(a.LocalMemory)
	case a.SharedMemory > 0:
		return humanBytes(a.SharedMemory) + " shared"
	}
	return "-"
}

// infoAdapter is one row of `info --json`; field names are a stable interface.
type infoAdapter struct {
	// ID is the adapter's identity: the device plugin's device ID, the
	// DRA device's name, the metrics' gpu label (package adapterid).
	ID       string `json:"id"`
	Kind     string `json:"kind"`
	Index    int    `json:"index"`
	Vendor   string `json:"vendor"`
	VendorID string `json:"vendorId"`
	DeviceID string `json:"deviceId"`
	// PCIID is what the PCI ID column prints: vendor:device, or the
	// ACPI id Windows on Arm reports ("QCOM0C36").
	PCIID       string   `json:"pciId"`
	SubSystemID string   `json:"subsystemId"`
	Revision    string   `json:"revision"`
	LUID        string   `json:"luid"`
	WDDM        string   `json:"wddm"`
	Flags       []string `json:"flags"`
	Description string   `json:"description,omitempty"`
	DriverStore string   `json:"driverStorePath"`
	Folder      string   `json:"folder,omitempty"`
	FolderPath  string   `json:"folderPath,omitempty"`
	Libraries   []string `json:"libraries,omitempty"`
	// Memory sizes from the statistics calls; absent on kernels without them.
	LocalMemory  uint64 `json:"localMemoryBytes,omitempty"`
	SharedMemory uint64 `json:"sharedMemoryBytes,omitempty"`
	Error        string `json:"error,omitempty"`
}

type infoReport struct {
	Device    string        `json:"device"`
	Ioctl     string        `json:"ioctl"`
	Adapters  []infoAdapter `json:"adapters"`
	Skipped   []string      `json:"skipped,omitempty"`
	LibDir    string        `json:"libDir"`
	Libraries []string      `json:"libraries"`
}

func infoCommand() command {
	return command{name: "info",
		summary: "List the GPU adapters and the driver files each one uses.\nWith --k8s: the resources wsl-gpu-device-plugin would advertise.",
		define: func(fs *flag.FlagSet) runFunc {
			asJSON := fs.Bool("json", false, "print JSON")
			k8s := fs.Bool("k8s", false, "print what wsl-gpu-device-plugin would advertise")
			return func(_ context.Context, e env, _ []string) error {
				return runInfo(e.cfg, *asJSON, *k8s, e.stdout)
			}
		}}
}

func runInfo(cfg config.Config, asJSON, k8s bool, stdout io.Writer) error {
	if k8s {
		return runInfoK8s(cfg, asJSON, stdout)
	}
	rep, err := gatherInfo(cfg)
	if err != nil {
		return fmt.Errorf("info: %w", err)
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	printInfo(stdout, rep)
	return nil
}

func gatherInfo(cfg config.Config) (*infoReport, error) {
	enum, err := dxcore.Enumerate(cfg.DxgDevice)
	if err != nil {
		return nil, err
	}
	inv, err := driverstore.Build(enum.Adapters, driverstore.Options{LibDir: cfg.LibDir, DriversDir: cfg.DriversDir, ListFiles: true})
	if err != nil {
		return nil, err
	}
	rep := &infoReport{Device: cfg.DxgDevice, Ioctl: enum.Ioctl, LibDir: inv.LibDir, Libraries: fileNames(inv.LibFiles)}
	if rep.Libraries == nil {
		rep.Libraries = []string{}
	}
	for _, s := range enum.Skipped {
		rep.Skipped = append(rep.Skipped, s.Error())
	}
	memory := map[string]gpustats.AdapterMemory{}
	if mem, _, err := gpustats.Capacity(cfg.DxgDevice); err == nil {
		for _, m := range mem {
			memory[m.LUID.String()] = m
		}
	}
	folders := map[string]driverstore.Folder{}
	for _, f := range inv.Folders {
		folders[f.Name] = f
	}
	ids := adapterid.Of(inv.Adapters)
	for i, a := range inv.Adapters {
		row := infoAdapter{
			ID:          ids[i].Name,
			Kind:        string(ids[i].Kind),
			Index:       a.Index,
			Vendor:      string(a.Vendor),
			VendorID:    fmt.Sprintf("0x%04x", a.PCI.Vendor),
			DeviceID:    fmt.Sprintf("0x%04x", a.PCI.Device),
			PCIID:       a.PCI.String(),
			SubSystemID: fmt.Sprintf("0x%04x%04x", a.PCI.SubSystem, a.PCI.SubVendor),
			Revision:    fmt.Sprintf("0x%02x", a.PCI.Revision),
			LUID:        a.LUID.String(),
			WDDM:        dxcore.WDDM(a.WDDMVersion),
			Flags:       strings.Split(a.Type.String(), ","),
			Description: a.Description,
			DriverStore: a.DriverStorePath,
			Folder:      a.Folder,
		}
		if a.Err != nil {
			row.Error = a.Err.Error()
		}
		if m, ok := memory[row.LUID]; ok {
			row.LocalMemory, row.SharedMemory = m.Local, m.NonLocal
		}
		if f, ok := folders[a.Folder]; ok {
			row.FolderPath = f.HostPath
			row.Libraries = fileNames(f.Files)
		}
		rep.Adapters = append(rep.Adapters, row)
	}
	return rep, nil
}

func fileNames(files []driverstore.File) []string {
	var n []string
	for _, f := range files {
		n = append(n, f.Name)
	}
	return n
}

func printInfo(w io.Writer, rep *infoReport) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "INDEX\tID\tKIND\tVENDOR\tPCI ID\tLUID\tWDDM\tMEMORY\tFLAGS\tDRIVER FOLDER\tKEY FILES")
	for _, a := range rep.Adapters {
		folder := a.Folder
		if a.Error != "" {
			folder = "MISSING"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
			a.Index, a.ID, a.Kind, a.Vendor, a.PCIID,
			a.LUID, a.WDDM, memoryColumn(a), strings.Join(a.Flags, ","), orDash(folder), orDash(strings.Join(a.Libraries, " ")))
	}
	tw.Flush()
	for _, a := range rep.Adapters {
		if a.Error != "" {
			fmt.Fprintf(w, "warning: %s\n", a.Error)
		}
	}
	for _, s := range rep.Skipped {
		fmt.Fprintf(w, "warning: skipped %s\n", s)
	}
	fmt.Fprintf(w, "lib dir %s: %s\n", rep.LibDir, orDash(strings.Join(rep.Libraries, " ")))
	fmt.Fprintf(w, "device %s, enumerated with %s\n", rep.Device, rep.Ioctl)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
