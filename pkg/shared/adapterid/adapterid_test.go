package adapterid_test

import (
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/driverstore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/dxcore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/kube/deviceplugin"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/kube/dra"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/kube/nodelabels"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/adapterid"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/fixture"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/simhost"
)

func TestKindOf(t *testing.T) {
	for _, tc := range []struct {
		name   string
		pci    uint32
		vendor driverstore.Vendor
		typ    dxcore.AdapterType
		want   adapterid.Kind
	}{
		{"a GPU", 0x8086, driverstore.Intel, dxcore.TypeRender, adapterid.GPU},
		{"WARP", 0x1414, driverstore.Microsoft, dxcore.TypeRender | dxcore.TypeSoftware, adapterid.Software},
		{"Intel's AI Boost", 0x8086, driverstore.Intel, dxcore.TypeComputeOnly, adapterid.NPU},
		{"Qualcomm's Hexagon", 0x4D4F4351, driverstore.Qualcomm, dxcore.TypeComputeOnly, adapterid.NPU},
		{"an NVIDIA GPU in MCDM mode", 0x10de, driverstore.NVIDIA, dxcore.TypeComputeOnly, adapterid.GPU},
		{"an NVIDIA GPU the marker file named", 0, driverstore.NVIDIA, dxcore.TypeComputeOnly, adapterid.GPU},
		{"an AMD compute-only GPU", 0x1002, driverstore.AMD, dxcore.TypeComputeOnly, adapterid.GPU},
		{"AMD's Ryzen AI NPU", 0x1022, driverstore.AMD, dxcore.TypeComputeOnly, adapterid.NPU},
		// The hook enumerates without the type: the id alone tells.
		{"AMD's Ryzen AI NPU, type not asked", 0x1022, driverstore.AMD, 0, adapterid.NPU},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := driverstore.Adapter{Adapter: dxcore.Adapter{Type: tc.typ, PCI: dxcore.PCIIDs{Vendor: tc.pci}}, Vendor: tc.vendor}
			if got := adapterid.KindOf(a); got != tc.want {
				t.Errorf("KindOf = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestOf(t *testing.T) {
	twin := driverstore.Adapter{Adapter: dxcore.Adapter{PCI: dxcore.PCIIDs{Vendor: 0x10de, Device: 0x20b0, SubSystem: 0x1450, SubVendor: 0x10de}}, Vendor: driverstore.NVIDIA}
	qc := driverstore.Adapter{Adapter: dxcore.Adapter{PCI: dxcore.PCIIDs{Vendor: 0x4D4F4351, Device: 0x36334330}}, Vendor: driverstore.Qualcomm}
	got := adapterid.Of([]driverstore.Adapter{twin, qc, twin})
	want := []string{"nvidia-20b0-145010de-0", "qualcomm-36334330-00000000-0", "nvidia-20b0-145010de-1"}
	for i := range want {
		if got[i].Name != want[i] {
			t.Errorf("adapter %d: %s, want %s", i, got[i].Name, want[i])
		}
	}
}

// rebooted is inv's host after a WSL reboot: the same adapters in the same
// order, every LUID new.
func rebooted(t *testing.T, profile string) (before, after *driverstore.Inventory) {
	t.Helper()
	p, err := simhost.Lookup(profile)
	if err != nil {
		t.Fatal(err)
	}
	dir := fixture.Host(t, profile, fixture.Options{Stubs: true})
	opt := driverstore.Options{LibDir: filepath.Join(dir, fixture.LibDir), DriversDir: filepath.Join(dir, fixture.DriversDir)}
	as := fixture.Adapters(p)
	before, err = driverstore.Build(as, opt)
	if err != nil {
		t.Fatal(err)
	}
	for i := range as {
		as[i].LUID.Low += 0x10000
	}
	after, err = driverstore.Build(as, opt)
	if err != nil {
		t.Fatal(err)
	}
	return before, after
}

// Every consumer of an adapter's identity names the adapter by Of's name,
// and a WSL reboot (new LUIDs) changes none of what they publish: the
// device plugin's IDs, the DRA driver's device names, the node labels.
// (The metrics' series: gpustats' TestSampleIdentity.)
func TestEveryConsumerTakesTheOneIdentity(t *testing.T) {
	for _, profile := range simhost.Names() {
		t.Run(profile, func(t *testing.T) {
			before, after := rebooted(t, profile)
			ids := adapterid.Of(before.Adapters)
			names := func(inv *driverstore.Inventory) (dp, draNames []string) {
				opt := deviceplugin.Options{Resources: map[driverstore.Vendor]string{}, NPUResource: "x.io/npu"}
				for _, v := range driverstore.Vendors() {
					opt.Resources[v] = "x.io/" + string(v)
				}
				for _, d := range deviceplugin.Build(inv, nil, nil, opt).Devices {
					dp = append(dp, d.ID)
				}
				for _, d := range dra.Track(nil, inv, nil, time.Unix(0, 0)) {
					draNames = append(draNames, d.Name)
				}
				slices.Sort(dp)
				return dp, draNames
			}
			dpBefore, draBefore := names(before)
			dpAfter, draAfter := names(after)
			var want, wantDP []string
			for _, id := range ids {
				want = append(want, id.Name)
				if id.Kind != adapterid.Software {
					wantDP = append(wantDP, id.Name)
				}
			}
			slices.Sort(wantDP)
			if !slices.Equal(draBefore, want) || !slices.Equal(dpBefore, wantDP) {
				t.Errorf("DRA names %v, device plugin IDs %v; want the identities %v", draBefore, dpBefore, want)
			}
			if !slices.Equal(dpAfter, dpBefore) || !slices.Equal(draAfter, draBefore) {
				t.Errorf("after a reboot: device plugin %v (was %v), DRA %v (was %v)", dpAfter, dpBefore, draAfter, draBefore)
			}
			if l1, l2 := nodelabels.Labels(before), nodelabels.Labels(after); !reflect.DeepEqual(l1, l2) {
				t.Errorf("labels changed at a reboot:\n%v\n%v", l1, l2)
			}
			for _, l := range nodelabels.Keys(nodelabels.Labels(before)) {
				if strings.Contains(l, "0x") {
					t.Errorf("label %s names a LUID", l)
				}
			}
		})
	}
}
