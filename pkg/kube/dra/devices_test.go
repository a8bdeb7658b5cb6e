package dra

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apiserver/pkg/cel/environment"
	dracel "k8s.io/dynamic-resource-allocation/cel"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/driverstore"
)

var t0 = time.Date(2026, 11, 26, 4, 0, 0, 0, time.UTC)

func TestSliceNvidiaLaptop(t *testing.T) {
	devs := Track(nil, inventory(t, "nvidia-laptop"), nil, t0)
	if got, want := names(devs), []string{"intel-9a49-22d817aa-0", "nvidia-2520-3a5c17aa-0"}; !slices.Equal(got, want) {
		t.Fatalf("names = %v, want %v", got, want)
	}
	api := Slice(devs, share)
	nv := api[1]
	str := func(name resourceapi.QualifiedName) string {
		if a, ok := nv.Attributes[name]; ok && a.StringValue != nil {
			return *a.StringValue
		}
		return "<absent>"
	}
	for name, want := range map[resourceapi.QualifiedName]string{
		AttrVendor: "nvidia", AttrLUID: "0x4486d1", AttrDescription: "NVIDIA GeForce RTX 3060 Laptop GPU",
		AttrDriverVersion: "32.0.15.6094", AttrFolder: "nvltwi.inf_amd64_7b2a5c1c4e6f8d90",
		AttrPCIVendor: "10de", AttrPCIDevice: "2520",
	} {
		if got := str(name); got != want {
			t.Errorf("attribute %s = %q, want %q", name, got, want)
		}
	}
	if a := nv.Attributes[AttrIndex]; a.IntValue == nil || *a.IntValue != 1 {
		t.Errorf("index = %+v, want 1", a)
	}
	if a := nv.Attributes[AttrWDDM]; a.VersionValue == nil || *a.VersionValue != "3.0.0" {
		t.Errorf("wddmVersion = %+v, want 3.0.0", a)
	}
	for name, want := range map[resourceapi.QualifiedName]bool{AttrIntegrated: false, AttrComputeOnly: false, AttrSoftware: false} {
		if a := nv.Attributes[name]; a.BoolValue == nil || *a.BoolValue != want {
			t.Errorf("%s = %+v, want %v", name, a, want)
		}
	}
	if a := api[0].Attributes[AttrIntegrated]; a.BoolValue == nil || !*a.BoolValue {
		t.Errorf("Intel iGPU integrated = %+v, want true", a)
	}
	if got := nv.Capacity[CapacityMemory].Value; got.Cmp(resource.MustParse("6Gi")) != 0 {
		t.Errorf("memory = %s, want 6Gi", got.String())
	}
	if len(nv.Taints) != 0 {
		t.Errorf("taints = %v, want none", nv.Taints)
	}
}

// Windows on Arm reports ACPI ids ("QCOM", "0C36") where PCI ids go: the
// attributes and names carry all 32 bits, not the low half, which is no
// one's PCI id ("4351"), and the NPU is published as compute-only.
func TestSliceSnapdragon(t *testing.T) {
	devs := Track(nil, inventory(t, "snapdragon-x"), nil, t0)
	if got, want := names(devs), []string{"qualcomm-36334330-00000000-0", "qualcomm-41304430-00000000-0"}; !slices.Equal(got, want) {
		t.Fatalf("names = %v, want %v", got, want)
	}
	api := Slice(devs, share)
	for i, want := range []struct {
		device, acpi string
		computeOnly  bool
	}{{"36334330", "QCOM0C36", false}, {"41304430", "QCOM0D0A", true}} {
		a := api[i].Attributes
		for name, v := range map[resourceapi.QualifiedName]string{AttrVendor: "qualcomm", AttrPCIVendor: "4d4f4351", AttrPCIDevice: want.device, AttrACPIID: want.acpi} {
			if got := a[name]; got.StringValue == nil || *got.StringValue != v {
				t.Errorf("%s: %s = %+v, want %q", api[i].Name, name, got, v)
			}
		}
		if got := a[AttrComputeOnly]; got.BoolValue == nil || *got.BoolValue != want.computeOnly {
			t.Errorf("%s: computeOnly = %+v, want %v", api[i].Name, got, want.computeOnly)
		}
	}
	// PCI adapters carry no ACPI id.
	for _, d := range Slice(Track(nil, inventory(t, "nvidia-laptop"), nil, t0), share) {
		if a, ok := d.Attributes[AttrACPIID]; ok {
			t.Errorf("%s: acpiID = %+v on a PCI adapter", d.Name, a)
		}
	}
}

// Where the host says nothing of integration (no hybrid laptop), an
// adapter that owns only a carve-out is integrated and one with memory of
// its own is not; a software adapter is neither.
func TestSliceIntegrated(t *testing.T) {
	warp := inventory(t, "amd-desktop")
	warp.Adapters[0].Type |= 0x4 // software
	for _, tt := range []struct {
		name string
		inv  *driverstore.Inventory
		want map[string]string
	}{
		{"desktop", inventory(t, "intel-arc-desktop"), map[string]string{"intel-a780-d0001458-0": "true", "intel-56a0-10208086-0": "false"}},
		{"hybrid laptop", inventory(t, "nvidia-laptop"), map[string]string{igDev: "true", nvDev: "false"}},
		{"meteor lake", inventory(t, "intel-npu"), map[string]string{"intel-7d55-0c111028-0": "true", "intel-7d1d-0c111028-0": "true"}},
		{"software", warp, map[string]string{"amd-744c-0e3b1002-0": "absent"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, d := range Slice(Track(nil, tt.inv, nil, t0), share) {
				got := "absent"
				if a, ok := d.Attributes[AttrIntegrated]; ok {
					got = strconv.FormatBool(*a.BoolValue)
				}
				if got != tt.want[d.Name] {
					t.Errorf("%s integrated = %s, want %s", d.Name, got, tt.want[d.Name])
				}
			}
		})
	}
}

// Sharing publishes each adapter's memory with a request policy the API
// server accepts: min and step of one step, the default rounded up to a
// step, the capacity rounded down to one (so a claim asking for all of
// it asks a valid amount); an integrated GPU's memory is its budget of
// system memory; an adapter with less than two steps is not shared.
func TestSliceSharing(t *testing.T) {
	const mi = 1 << 20
	small := inventory(t, "amd-desktop")
	small.Adapters[0].Memory.DedicatedVideo = 600 * mi // one step left after min
	odd := inventory(t, "amd-desktop")
	odd.Adapters[0].Memory.DedicatedVideo = 5981 * mi
	tiny := inventory(t, "amd-desktop")
	tiny.Adapters[0].Memory.DedicatedVideo, tiny.Adapters[0].Memory.SharedSystem = 128*mi, 300*mi
	type dev struct {
		memory, def string
		shared      bool
	}
	for _, tt := range []struct {
		name  string
		inv   *driverstore.Inventory
		share Sharing
		want  map[string]dev
	}{
		{"laptop", inventory(t, "nvidia-laptop"), share, map[string]dev{nvDev: {"6Gi", "1Gi", true}, igDev: {"8Gi", "1Gi", true}}},
		{"laptop, sharing off", inventory(t, "nvidia-laptop"), Sharing{}, map[string]dev{nvDev: {"6Gi", "", false}, igDev: {"8320Mi", "", false}}},
		{"odd size", odd, share, map[string]dev{"amd-744c-0e3b1002-0": {"5888Mi", "1Gi", true}}},
		{"default above the device", small, share, map[string]dev{"amd-744c-0e3b1002-0": {"512Mi", "512Mi", true}}},
		{"default between steps", inventory(t, "amd-desktop"), Sharing{Step: 256 * mi, Default: 1000 * mi}, map[string]dev{"amd-744c-0e3b1002-0": {"24Gi", "1Gi", true}}},
		{"less than two steps", tiny, share, map[string]dev{"amd-744c-0e3b1002-0": {"428Mi", "", false}}},
		{"NPU", inventory(t, "intel-npu"), share, map[string]dev{"intel-7d55-0c111028-0": {"8Gi", "1Gi", true}, "intel-7d1d-0c111028-0": {"8Gi", "1Gi", true}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, d := range Slice(Track(nil, tt.inv, nil, t0), tt.share) {
				c := d.Capacity[CapacityMemory]
				got := dev{memory: c.Value.String(), shared: d.AllowMultipleAllocations != nil && *d.AllowMultipleAllocations}
				if p := c.RequestPolicy; p != nil {
					got.def = p.Default.String()
					if p.ValidRange == nil || p.ValidRange.Min.String() != "256Mi" || p.ValidRange.Step.String() != "256Mi" || p.ValidRange.Max != nil || p.ValidValues != nil {
						t.Errorf("%s: policy %+v, want min and step 256Mi", d.Name, p)
					}
				}
				if got != tt.want[d.Name] {
					t.Errorf("%s: %+v, want %+v", d.Name, got, tt.want[d.Name])
				}
				if got.shared != (c.RequestPolicy != nil) {
					t.Errorf("%s: a request policy without multiple allocations (the API refuses it)", d.Name)
				}
			}
		})
	}
}

func TestSharingValidate(t *testing.T) {
	for _, tt := range []struct {
		s    Sharing
		want string
	}{
		{Sharing{}, ""},
		{share, ""},
		{Sharing{Step: 1 << 28}, "memory default 0 with step 268435456: a claim that asks nothing must consume something, or any number would fit"},
		{Sharing{Step: -1, Default: 1}, "memory step -1 and default 1: want 0 or more"},
	} {
		if err := tt.s.Validate(); fmt.Sprint(err) != tt.want && !(err == nil && tt.want == "") {
			t.Errorf("%+v.Validate() = %v, want %q", tt.s, err, tt.want)
		}
	}
}

func TestSliceLimits(t *testing.T) {
	inv := inventory(t, "amd-desktop")
	inv.Adapters[0].Description = strings.Repeat("é", 40) // 80 bytes
	inv.Adapters[0].Folder = strings.Repeat("f", 65)
	inv.Adapters[0].WDDMVersion = 0
	d := Slice(Track(nil, inv, nil, t0), share)[0]
	if got := *d.Attributes[AttrDescription].StringValue; got != strings.Repeat("é", 32) {
		t.Errorf("description = %q (%d bytes), want 32 runes cut at a rune boundary", got, len(got))
	}
	for _, name := range []resourceapi.QualifiedName{AttrFolder, AttrWDDM} {
		if _, ok := d.Attributes[name]; ok {
			t.Errorf("%s published: %+v", name, d.Attributes[name])
		}
	}
}

func TestTrack(t *testing.T) {
	laptop := inventory(t, "nvidia-laptop")
	devs := Track(nil, laptop, nil, t0)

	// The iGPU disappears: the NVIDIA adapter becomes index 0 and keeps
	// its name; the iGPU stays published, tainted.
	gone := Track(devs, without(laptop, 0), nil, t0.Add(time.Minute))
	if got, want := names(gone), []string{"nvidia-2520-3a5c17aa-0", "intel-9a49-22d817aa-0"}; !slices.Equal(got, want) {
		t.Fatalf("names after removal = %v, want %v", got, want)
	}
	igpu := gone[1]
	if igpu.Present || igpu.Reason != ReasonGone || !igpu.Since.Equal(t0.Add(time.Minute)) {
		t.Errorf("removed iGPU = %+v", igpu)
	}
	if want := "device intel-9a49-22d817aa-0 (Intel(R) Iris(R) Xe Graphics, LUID 0x1a1d77): the host no longer lists this adapter: it was removed or disabled in Windows, or WSL was restarted: reallocate the claim"; igpu.Problem != want {
		t.Errorf("problem = %q\nwant %q", igpu.Problem, want)
	}
	taints := Slice(gone, share)[1].Taints
	if len(taints) != 1 || taints[0].Key != TaintKey || taints[0].Value != ReasonGone || taints[0].Effect != resourceapi.DeviceTaintEffectNoSchedule || !taints[0].TimeAdded.Time.Equal(t0.Add(time.Minute)) {
		t.Errorf("taints = %+v", taints)
	}
	if !gone[0].Healthy() || gone[0].Adapter.Index != 0 {
		t.Errorf("NVIDIA after removal = %+v", gone[0])
	}
	// Still gone later: the taint keeps its time, so the slice is unchanged.
	again := Track(gone, without(laptop, 0), nil, t0.Add(time.Hour))
	if !reflect.DeepEqual(Slice(again, share), Slice(gone, share)) {
		t.Errorf("slice changed while nothing did:\n%+v\n%+v", Slice(again, share), Slice(gone, share))
	}
	// It returns: no taint.
	back := Track(again, laptop, nil, t0.Add(2*time.Hour))
	if !reflect.DeepEqual(Slice(back, share), Slice(devs, share)) {
		t.Errorf("slice after return differs from the first")
	}

	// Its folder vanishes (a driver update while WSL runs).
	missing := inventory(t, "nvidia-laptop")
	missing.Adapters[1].Folder = ""
	missing.Adapters[1].Err = &driverstore.FolderError{Index: 1, LUID: missing.Adapters[1].LUID, Description: missing.Adapters[1].Description,
		Folder: "nvltwi.inf_amd64_7b2a5c1c4e6f8d90", DriversDir: "/usr/lib/wsl/drivers", Err: fs.ErrNotExist}
	fm := Track(devs, missing, nil, t0)
	if fm[1].Reason != ReasonFolderMissing || !fm[1].Present || !strings.Contains(fm[1].Problem, `driver store folder "nvltwi.inf_amd64_7b2a5c1c4e6f8d90" was not found`) {
		t.Errorf("folder missing = %+v", fm[1])
	}

	// The host cannot be listed at all.
	none := Track(devs, nil, errors.New("open /dev/dxg: no such file or directory"), t0)
	for _, d := range none {
		if d.Present || d.Reason != ReasonNoHost || !strings.Contains(d.Problem, "cannot be listed: open /dev/dxg") {
			t.Errorf("unlisted host: %+v", d)
		}
	}
}

// Two identical adapters get ordinals in host order.
func TestTrackIdenticalAdapters(t *testing.T) {
	inv := inventory(t, "amd-desktop")
	second := inv.Adapters[0]
	second.Index, second.LUID.Low = 1, 0x20000
	inv.Adapters = append(inv.Adapters, second)
	if got, want := names(Track(nil, inv, nil, t0)), []string{"amd-744c-0e3b1002-0", "amd-744c-0e3b1002-1"}; !slices.Equal(got, want) {
		t.Errorf("names = %v, want %v", got, want)
	}
}

// The selectors the README and the DeviceClasses show, evaluated by the
// scheduler's own CEL code against what the driver publishes for each
// simulated host.
var selectors = []struct {
	name, expr string
	want       map[string][]string // profile -> matching devices
}{
	{"vendor nvidia", `device.attributes["gpu.wsl-gpu-hook.dev"].vendor == "nvidia"`, map[string][]string{
		"nvidia-laptop": {"nvidia-2520-3a5c17aa-0"}, "intel-npu": nil, "compute-only": {"nvidia-20b0-145010de-0"}}},
	{"NVIDIA with >= 8Gi", `device.attributes["gpu.wsl-gpu-hook.dev"].vendor == "nvidia" &&
  device.capacity["gpu.wsl-gpu-hook.dev"].memory.compareTo(quantity("8Gi")) >= 0`, map[string][]string{
		"nvidia-laptop": nil, "compute-only": {"nvidia-20b0-145010de-0"}}},
	{"not integrated", `!device.attributes["gpu.wsl-gpu-hook.dev"].?integrated.orValue(false)`, map[string][]string{
		"nvidia-laptop": {"nvidia-2520-3a5c17aa-0"}, "intel-arc-desktop": {"intel-56a0-10208086-0"}}},
	{"integrated (the fallback's last choice)", `device.attributes["gpu.wsl-gpu-hook.dev"].?integrated.orValue(false)`, map[string][]string{
		"nvidia-laptop": {"intel-9a49-22d817aa-0"}, "intel-npu": {"intel-7d55-0c111028-0", "intel-7d1d-0c111028-0"}, "amd-desktop": nil}},
	{"by driver version", `device.attributes["gpu.wsl-gpu-hook.dev"].driverVersion == "32.0.15.6094"`, map[string][]string{
		"nvidia-laptop": {"nvidia-2520-3a5c17aa-0"}, "amd-desktop": nil}},
	{"WDDM 3.1 or later", `device.attributes["gpu.wsl-gpu-hook.dev"].wddmVersion.isGreaterThan(semver("3.0.0"))`, map[string][]string{
		"nvidia-laptop": nil, "amd-desktop": {"amd-744c-0e3b1002-0"}}},
	{"the NPU", `device.attributes["gpu.wsl-gpu-hook.dev"].computeOnly && device.attributes["gpu.wsl-gpu-hook.dev"].vendor == "intel"`, map[string][]string{
		"intel-npu": {"intel-7d1d-0c111028-0"}, "nvidia-laptop": nil}},
}

func TestSelectors(t *testing.T) {
	for _, env := range []environment.Type{environment.NewExpressions, environment.StoredExpressions} {
		for _, s := range selectors {
			prog := dracel.GetCompiler(dracel.Features{}).CompileCELExpression(s.expr, dracel.Options{EnvType: &env})
			if prog.Error != nil {
				t.Fatalf("%s: compile: %v", s.name, prog.Error)
			}
			for profile, want := range s.want {
				var got []string
				for _, d := range Slice(Track(nil, inventory(t, profile), nil, t0), share) {
					ok, _, err := prog.DeviceMatches(context.Background(), dracel.Device{Driver: DriverName, Attributes: d.Attributes, Capacity: d.Capacity})
					if err != nil {
						t.Errorf("%s on %s/%s: %v", s.name, profile, d.Name, err)
					}
					if ok {
						got = append(got, d.Name)
					}
				}
				if !slices.Equal(got, want) {
					t.Errorf("%s (env %v) on %s matches %v, want %v", s.name, env, profile, got, want)
				}
			}
		}
	}
}
