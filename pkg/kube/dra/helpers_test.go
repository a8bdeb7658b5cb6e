package dra

import (
	"testing"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/driverstore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/dxcore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/simhost"
)

// nvidiaDriver is the driver version the tests' NVIDIA adapters report.
const nvidiaDriver = dxcore.DriverVersion(32<<48 | 15<<16 | 6094)

// inventory is profile's host as gpuhost.List would return it with
// Resources, without touching the disk: every folder found.
func inventory(t *testing.T, profile string) *driverstore.Inventory {
	t.Helper()
	p, err := simhost.Lookup(profile)
	if err != nil {
		t.Fatal(err)
	}
	inv := &driverstore.Inventory{LibDir: "/usr/lib/wsl/lib", DriversDir: "/usr/lib/wsl/drivers"}
	for i, a := range p.Adapters {
		v := driverstore.VendorOf(a.VendorID)
		ver := dxcore.DriverVersion(31<<48 | 101<<16 | 6078)
		if v == driverstore.NVIDIA {
			ver = nvidiaDriver
		}
		inv.Adapters = append(inv.Adapters, driverstore.Adapter{
			Adapter: dxcore.Adapter{
				Index: i, LUID: dxcore.LUID{Low: a.LUIDLow, High: int32(a.LUIDHigh)},
				WDDMVersion: a.WDDMVersion, Type: dxcore.AdapterType(a.Flags),
				PCI:         dxcore.PCIIDs{Vendor: a.VendorID, Device: a.DeviceID, SubVendor: a.SubVendorID, SubSystem: a.SubSystemID, Revision: a.RevisionID},
				Description: a.Description, DriverStorePath: a.DriverStorePath,
				DriverVersion: ver, Memory: dxcore.Memory{DedicatedVideo: a.DedicatedMemory, SharedSystem: 8 << 30},
			},
			Vendor: v, Folder: a.Folder, Registry: a.Folder,
		})
	}
	return inv
}

// without is inv without the adapters at the given host indexes, the
// others renumbered as the host would list them.
func without(inv *driverstore.Inventory, gone ...int) *driverstore.Inventory {
	out := *inv
	out.Adapters = nil
	for _, a := range inv.Adapters {
		skip := false
		for _, g := range gone {
			skip = skip || a.Index == g
		}
		if !skip {
			a.Index = len(out.Adapters)
			out.Adapters = append(out.Adapters, a)
		}
	}
	return &out
}

func names(devs []Device) []string {
	var out []string
	for _, d := range devs {
		out = append(out, d.Name)
	}
	return out
}

// share is the chart's default: 1Gi per claim that asks nothing, 256Mi steps.
var share = Sharing{Step: 256 << 20, Default: 1 << 30}

// node is a node whose claims' files go where the chart puts them.
var node = Node{Pool: pool, Spec: specOpt, MetadataDir: "/var/lib/kubelet/plugins/gpu.wsl-gpu-hook.dev/claims", Sharing: share}
