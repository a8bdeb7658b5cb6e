package dra

import (
	"errors"
	"io/fs"
	"reflect"
	"slices"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/cdispec"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/devnode"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/driverstore"
)

const (
	pool  = "node-a"
	nvDev = "nvidia-2520-3a5c17aa-0"
	igDev = "intel-9a49-22d817aa-0"
)

var specOpt = cdispec.Options{Device: devnode.Node{Path: "/dev/dxg"}, LibDir: "/usr/lib/wsl/lib", HookPath: "/usr/local/bin/wsl-gpu-hook"}

type result = resourceapi.DeviceRequestAllocationResult

func claim(uid string, results ...result) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "gpu", UID: types.UID(uid)}}
	if results != nil {
		c.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: results}}
	}
	return c
}

func ours(request, device string) result {
	return result{Request: request, Driver: DriverName, Pool: pool, Device: device}
}

func TestPlanPrepare(t *testing.T) {
	inv := inventory(t, "nvidia-laptop")
	devs := Track(nil, inv, nil, t0)
	p, err := PlanPrepare(claim(uid1, ours("gpu", nvDev)), pool, devs, inv, &Checkpoint{Claims: map[string]Prepared{}}, specOpt)
	if err != nil {
		t.Fatal(err)
	}
	spec := p.Prepared.Spec
	noSpec := p.Prepared
	noSpec.Spec = nil
	want := samplePrepared(uid1)
	want.Spec = nil
	if !reflect.DeepEqual(noSpec, want) {
		t.Errorf("prepared = %+v\nwant %+v", noSpec, want)
	}
	if spec == nil || spec.Kind != CDIKind || len(spec.Devices) != 1 || spec.Devices[0].Name != uid1+"-"+nvDev {
		t.Fatalf("spec = %+v", spec)
	}
	env := spec.Devices[0].ContainerEdits.Env
	if want := "WSL_GPU_CDI_GPU_WSL_GPU_HOOK_DEV_CLAIM_" + strings.ToUpper(strings.ReplaceAll(uid1+"-"+nvDev, "-", "_")) + "=luid:0x4486d1"; !slices.Contains(env, want) {
		t.Errorf("device env = %v, want %s", env, want)
	}
	// The device's own hook carries its selection: the hook reads no
	// config.json, so pods with hostUsers: false work too.
	if hooks := spec.Devices[0].ContainerEdits.Hooks; len(hooks) != 1 || hooks[0].HookName != "createContainer" || !slices.Equal(hooks[0].Args[len(hooks[0].Args)-2:], []string{"cdi-hook", "luid:0x4486d1"}) {
		t.Errorf("device hooks = %+v, want one createContainer cdi-hook luid:0x4486d1", hooks)
	}
	// Nothing in the spec names the driver store folder: a driver update
	// while the pod runs leaves it valid.
	data, _ := p.Prepared.SpecData()
	if strings.Contains(string(data), "nvltwi") || !strings.Contains(string(data), `"/dev/dxg"`) || !strings.Contains(string(data), "cdi-hook") {
		t.Errorf("spec:\n%s", data)
	}
	again, err := PlanPrepare(claim(uid1, ours("gpu", nvDev)), pool, devs, inv, &Checkpoint{Claims: map[string]Prepared{uid1: p.Prepared}}, specOpt)
	if err != nil || !reflect.DeepEqual(again, p) {
		t.Errorf("second plan differs (prepare must be idempotent): %+v, %v", again, err)
	}
}

func TestPlanPrepareSeveralAndOtherDrivers(t *testing.T) {
	inv := inventory(t, "nvidia-laptop")
	c := claim(uid1, ours("a", igDev), result{Request: "x", Driver: "gpu.nvidia.com", Pool: pool, Device: "gpu-0"}, ours("b", nvDev))
	p, err := PlanPrepare(c, pool, Track(nil, inv, nil, t0), inv, nil, specOpt)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range p.Prepared.Devices {
		got = append(got, d.Request+":"+d.CDIDevice)
	}
	if want := []string{"a:" + CDIDevice(uid1, igDev), "b:" + CDIDevice(uid1, nvDev)}; !slices.Equal(got, want) {
		t.Errorf("devices = %v, want %v", got, want)
	}
	if len(p.Prepared.Spec.Devices) != 2 {
		t.Errorf("spec devices = %d, want 2", len(p.Prepared.Spec.Devices))
	}
}

func TestPlanPrepareRefuses(t *testing.T) {
	inv := inventory(t, "nvidia-laptop")
	devs := Track(nil, inv, nil, t0)
	missing := inventory(t, "nvidia-laptop")
	missing.Adapters[1].Folder, missing.Adapters[1].Err = "", &driverstore.FolderError{Index: 1, LUID: missing.Adapters[1].LUID,
		Description: missing.Adapters[1].Description, Folder: "nvltwi.inf_amd64_7b2a5c1c4e6f8d90", DriversDir: "/usr/lib/wsl/drivers", Err: fs.ErrNotExist}
	const other = "0a0b0c0d-0000-4000-8000-000000000001"
	held := &Checkpoint{Claims: map[string]Prepared{other: {Namespace: "team", Name: "first", SpecFile: SpecFile(other),
		Devices: []PreparedDevice{{Request: "gpu", Pool: pool, Device: nvDev, CDIDevice: CDIDevice(other, nvDev)}}}}}
	tests := []struct {
		name  string
		claim *resourceapi.ResourceClaim
		devs  []Device
		cp    *Checkpoint
		want  string
	}{
		{"not allocated", claim(uid1), devs, nil, "claim default/gpu: not allocated: the scheduler has not placed it yet"},
		{"bad UID", claim("A/../b", ours("gpu", nvDev)), devs, nil, `claim default/gpu: claim UID "A/../b": want lowercase letters, digits and '-'`},
		{"another node's pool", claim(uid1, result{Request: "gpu", Driver: DriverName, Pool: "node-b", Device: nvDev}), devs, nil,
			`claim default/gpu: device nvidia-2520-3a5c17aa-0 was allocated from pool "node-b", and this node's pool is "node-a": the claim belongs to another node`},
		{"unknown device", claim(uid1, ours("gpu", "amd-744c-0e3b1002-0")), devs, nil,
			"claim default/gpu: device amd-744c-0e3b1002-0 is not one this node has published: delete the claim so it is allocated again"},
		{"folder vanished", claim(uid1, ours("gpu", nvDev)), Track(devs, missing, nil, t0), nil,
			`claim default/gpu: adapter 1 (NVIDIA GeForce RTX 3060 Laptop GPU, LUID 0x4486d1): driver store folder "nvltwi.inf_amd64_7b2a5c1c4e6f8d90" was not found under /usr/lib/wsl/drivers: the Windows driver was probably updated while WSL was running: run wsl --shutdown`},
		{"adapter gone", claim(uid1, ours("gpu", nvDev)), Track(devs, without(inv, 1), nil, t0), nil,
			"claim default/gpu: device nvidia-2520-3a5c17aa-0 (NVIDIA GeForce RTX 3060 Laptop GPU, LUID 0x4486d1): the host no longer lists this adapter: it was removed or disabled in Windows, or WSL was restarted: reallocate the claim"},
		{"held by another claim", claim(uid1, ours("gpu", nvDev)), devs, held,
			"claim default/gpu: device nvidia-2520-3a5c17aa-0 is already prepared for claim team/first: one device serves one claim; to share it, let the pods reference one ResourceClaim"},
		{"only other drivers", claim(uid1, result{Request: "x", Driver: "gpu.nvidia.com", Pool: pool, Device: "gpu-0"}), devs, nil,
			"claim default/gpu: no device of driver gpu.wsl-gpu-hook.dev is allocated to it"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := PlanPrepare(tt.claim, pool, tt.devs, inv, tt.cp, specOpt)
			var pe *PrepareError
			if p != nil || !errors.As(err, &pe) || err.Error() != tt.want {
				t.Errorf("PlanPrepare = %v, %v\nwant error %s", p, err, tt.want)
			}
		})
	}
}

// Admin access (monitoring) may prepare a device another claim holds, and
// a device held with admin access does not block an ordinary claim.
func TestPlanPrepareAdminAccess(t *testing.T) {
	inv := inventory(t, "nvidia-laptop")
	devs := Track(nil, inv, nil, t0)
	const other = "0a0b0c0d-0000-4000-8000-000000000001"
	cp := &Checkpoint{Claims: map[string]Prepared{other: {Namespace: "team", Name: "first", SpecFile: SpecFile(other),
		Devices: []PreparedDevice{{Request: "gpu", Pool: pool, Device: nvDev, CDIDevice: CDIDevice(other, nvDev)}}}}}
	admin := ours("gpu", nvDev)
	admin.AdminAccess = ptr.To(true)
	p, err := PlanPrepare(claim(uid1, admin), pool, devs, inv, cp, specOpt)
	if err != nil || !p.Prepared.Devices[0].AdminAccess {
		t.Fatalf("admin claim: %+v, %v", p, err)
	}
	cp.Claims = map[string]Prepared{uid1: p.Prepared}
	if _, err := PlanPrepare(claim(other, ours("gpu", nvDev)), pool, devs, inv, cp, specOpt); err != nil {
		t.Errorf("ordinary claim beside an admin one: %v", err)
	}
}

// An opaque config for this driver, from the claim or its DeviceClass,
// fails the claim with one line that says the driver takes no parameters;
// one for another driver is ignored, as the API says.
func TestPlanPrepareOpaqueConfig(t *testing.T) {
	inv := inventory(t, "nvidia-laptop")
	devs := Track(nil, inv, nil, t0)
	opaque := func(source resourceapi.AllocationConfigSource, driver string, requests ...string) resourceapi.DeviceAllocationConfiguration {
		return resourceapi.DeviceAllocationConfiguration{Source: source, Requests: requests, DeviceConfiguration: resourceapi.DeviceConfiguration{
			Opaque: &resourceapi.OpaqueDeviceConfiguration{Driver: driver, Parameters: runtime.RawExtension{Raw: []byte(`{"apiVersion":"gpu.wsl-gpu-hook.dev/v1","kind":"GpuConfig","sharing":"timeSlicing"}`)}},
		}}
	}
	tests := []struct {
		name   string
		config []resourceapi.DeviceAllocationConfiguration
		want   string
	}{
		{"from the claim", []resourceapi.DeviceAllocationConfiguration{opaque(resourceapi.AllocationConfigSourceClaim, DriverName, "gpu")},
			"claim default/gpu: opaque parameters for driver gpu.wsl-gpu-hook.dev (kind GpuConfig, from the claim, for request gpu) are not understood: the driver takes no parameters: remove the opaque config and select the adapter with CEL selectors on its attributes"},
		{"from the class", []resourceapi.DeviceAllocationConfiguration{
			opaque(resourceapi.AllocationConfigSourceClaim, "gpu.nvidia.com"),
			opaque(resourceapi.AllocationConfigSourceClass, DriverName)},
			"claim default/gpu: opaque parameters for driver gpu.wsl-gpu-hook.dev (kind GpuConfig, from its DeviceClass, for every request) are not understood: the driver takes no parameters: remove the opaque config and select the adapter with CEL selectors on its attributes"},
		{"another driver's", []resourceapi.DeviceAllocationConfiguration{opaque(resourceapi.AllocationConfigSourceClaim, "gpu.nvidia.com", "gpu")}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := claim(uid1, ours("gpu", nvDev))
			c.Status.Allocation.Devices.Config = tt.config
			p, err := PlanPrepare(c, pool, devs, inv, nil, specOpt)
			if tt.want == "" {
				if err != nil || p == nil {
					t.Errorf("PlanPrepare = %v, %v; want a plan", p, err)
				}
				return
			}
			var pe *PrepareError
			if p != nil || !errors.As(err, &pe) || err.Error() != tt.want {
				t.Errorf("PlanPrepare = %v, %v\nwant error %s", p, err, tt.want)
			}
		})
	}
}
