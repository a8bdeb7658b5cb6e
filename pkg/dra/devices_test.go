package dra

import (
	"context"
	"errors"
	"io/fs"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apiserver/pkg/cel/environment"
	dracel "k8s.io/dynamic-resource-allocation/cel"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/driverstore"
)

var t0 = time.Date(2026, 11, 26, 4, 0, 0, 0, time.UTC)

func TestSliceNvidiaLaptop(t *testing.T) {
	devs := Track(nil, inventory(t, "nvidia-laptop"), nil, t0)
	if got, want := names(devs), []string{"intel-9a49-22d817aa-0", "nvidia-2520-3a5c17aa-0"}; !slices.Equal(got, want) {
		t.Fatalf("names = %v, want %v", got, want)
	}
	api := Slice(devs)
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
	api := Slice(devs)
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
	for _, d := range Slice(Track(nil, inventory(t, "nvidia-laptop"), nil, t0)) {
		if a, ok := d.Attributes[AttrACPIID]; ok {
			t.Errorf("%s: acpiID = %+v on a PCI adapter", d.Name, a)
		}
	}
}

// A desktop host says nothing about integration: the attribute is absent,
// not guessed.
func TestSliceIntegratedOnlyWhereHostSays(t *testing.T) {
	for _, d := range Slice(Track(nil, inventory(t, "intel-arc-desktop"), nil, t0)) {
		if _, ok := d.Attributes[AttrIntegrated]; ok {
			t.Errorf("%s has integrated = %v; the host did not say", d.Name, d.Attributes[AttrIntegrated])
		}
	}
}

func TestSliceLimits(t *testing.T) {
	inv := inventory(t, "amd-desktop")
	inv.Adapters[0].Description = strings.Repeat("é", 40) // 80 bytes
	inv.Adapters[0].Folder = strings.Repeat("f", 65)
	inv.Adapters[0].WDDMVersion = 0
	d := Slice(Track(nil, inv, nil, t0))[0]
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
	taints := Slice(gone)[1].Taints
	if len(taints) != 1 || taints[0].Key != TaintKey || taints[0].Value != ReasonGone || taints[0].Effect != resourceapi.DeviceTaintEffectNoSchedule || !taints[0].TimeAdded.Time.Equal(t0.Add(time.Minute)) {
		t.Errorf("taints = %+v", taints)
	}
	if !gone[0].Healthy() || gone[0].Adapter.Index != 0 {
		t.Errorf("NVIDIA after removal = %+v", gone[0])
	}
	// Still gone later: the taint keeps its time, so the slice is unchanged.
	again := Track(gone, without(laptop, 0), nil, t0.Add(time.Hour))
	if !reflect.DeepEqual(Slice(again), Slice(gone)) {
		t.Errorf("slice changed while nothing did:\n%+v\n%+v", Slice(again), Slice(gone))
	}
	// It returns: no taint.
	back := Track(again, laptop, nil, t0.Add(2*time.Hour))
	if !reflect.DeepEqual(Slice(back), Slice(devs)) {
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
		"nvidia-laptop": {"nvidia-2520-3a5c17aa-0"}, "intel-arc-desktop": {"intel-a780-d0001458-0", "intel-56a0-10208086-0"}}},
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
				for _, d := range Slice(Track(nil, inventory(t, profile), nil, t0)) {
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
