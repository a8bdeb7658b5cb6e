package dra

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/api/metadata"
	"k8s.io/dynamic-resource-allocation/devicemetadata"
	"k8s.io/utils/ptr"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/devnode"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/driverstore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/setup/cdispec"
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
	p, err := PlanPrepare(claim(uid1, ours("gpu", nvDev)), node, devs, inv, &Checkpoint{Claims: map[string]Prepared{}})
	if err != nil {
		t.Fatal(err)
	}
	spec := p.Prepared.Spec
	noSpec := p.Prepared
	noSpec.Spec, noSpec.Metadata = nil, nil
	want := samplePrepared(uid1)
	want.Spec = nil
	want.Devices[0].Memory = 6 << 30 // the whole adapter: not a share
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
	again, err := PlanPrepare(claim(uid1, ours("gpu", nvDev)), node, devs, inv, &Checkpoint{Claims: map[string]Prepared{uid1: p.Prepared}})
	if err != nil || !reflect.DeepEqual(again, p) {
		t.Errorf("second plan differs (prepare must be idempotent): %+v, %v", again, err)
	}
}

func TestPlanPrepareSeveralAndOtherDrivers(t *testing.T) {
	inv := inventory(t, "nvidia-laptop")
	c := claim(uid1, ours("a", igDev), result{Request: "x", Driver: "gpu.nvidia.com", Pool: pool, Device: "gpu-0"}, ours("b", nvDev))
	p, err := PlanPrepare(c, node, Track(nil, inv, nil, t0), inv, nil)
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
			"claim default/gpu: device nvidia-2520-3a5c17aa-0 is already prepared for claim team/first, and one of the two has it alone: to share an adapter, ask for part of its memory (capacity.requests.memory) with the driver's sharing on, or let the pods reference one ResourceClaim"},
		{"a share beside a claim that has it alone", claim(uid1, shareOf("gpu", nvDev, uid2, "1Gi")), devs, held,
			"claim default/gpu: device nvidia-2520-3a5c17aa-0 is already prepared for claim team/first, and one of the two has it alone: to share an adapter, ask for part of its memory (capacity.requests.memory) with the driver's sharing on, or let the pods reference one ResourceClaim"},
		{"only other drivers", claim(uid1, result{Request: "x", Driver: "gpu.nvidia.com", Pool: pool, Device: "gpu-0"}), devs, nil,
			"claim default/gpu: no device of driver gpu.wsl-gpu-hook.dev is allocated to it"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := PlanPrepare(tt.claim, node, tt.devs, inv, tt.cp)
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
	p, err := PlanPrepare(claim(uid1, admin), node, devs, inv, cp)
	if err != nil || !p.Prepared.Devices[0].AdminAccess {
		t.Fatalf("admin claim: %+v, %v", p, err)
	}
	cp.Claims = map[string]Prepared{uid1: p.Prepared}
	if _, err := PlanPrepare(claim(other, ours("gpu", nvDev)), node, devs, inv, cp); err != nil {
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
			p, err := PlanPrepare(c, node, devs, inv, nil)
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

// shareOf is a share of device as the scheduler allocates it on a device
// that allows multiple allocations.
func shareOf(request, device, shareID, memory string) result {
	r := ours(request, device)
	r.ShareID = ptr.To(types.UID(shareID))
	r.ConsumedCapacity = map[resourceapi.QualifiedName]resource.Quantity{CapacityMemory: resource.MustParse(memory)}
	return r
}

// Claims that each have a share of one adapter are all prepared, each its
// own CDI device with what it was promised in its variables; a claim that
// wants the device alone is refused beside them, and admin access is
// refused nothing.
func TestPlanPrepareShares(t *testing.T) {
	inv := inventory(t, "nvidia-laptop")
	devs := Track(nil, inv, nil, t0)
	cp := &Checkpoint{Claims: map[string]Prepared{}}
	uids := []string{"0a0b0c0d-0000-4000-8000-00000000000a", "0a0b0c0d-0000-4000-8000-00000000000b", "0a0b0c0d-0000-4000-8000-00000000000c"}
	for i, uid := range uids {
		share := fmt.Sprintf("5e5e5e5e-0000-4000-8000-00000000000%d", i)
		p, err := PlanPrepare(claim(uid, shareOf("gpu", nvDev, share, fmt.Sprintf("%dGi", i+1))), node, devs, inv, cp)
		if err != nil {
			t.Fatalf("share %d: %v", i, err)
		}
		if d := p.Prepared.Devices[0]; d.ShareID != share || d.Memory != int64(i+1)<<30 || d.CDIDevice != CDIDevice(uid, nvDev) {
			t.Errorf("share %d: prepared %+v", i, d)
		}
		env := p.Prepared.Spec.Devices[0].ContainerEdits.Env
		for _, want := range []string{"WSL_GPU_DRA_MEMORY=" + strconv.Itoa((i+1)<<30), "WSL_GPU_DRA_LUID=0x4486d1", "WSL_GPU_DRA_INDEX=1",
			"WSL_GPU_DRA_DEVICE=" + nvDev, "WSL_GPU_DRA_REQUEST=gpu", "WSL_GPU_DRA_DESCRIPTION=NVIDIA GeForce RTX 3060 Laptop GPU"} {
			if !slices.Contains(env, want) {
				t.Errorf("share %d: env %v lacks %s", i, env, want)
			}
		}
		cp.Claims[uid] = p.Prepared
	}
	if got := cp.Promised(); !reflect.DeepEqual(got, map[string]int64{"0x4486d1": 6 << 30}) {
		t.Errorf("Promised = %v, want 6Gi on the NVIDIA adapter", got)
	}
	_, err := PlanPrepare(claim(uid1, ours("gpu", nvDev)), node, devs, inv, cp)
	if want := "claim default/gpu: device nvidia-2520-3a5c17aa-0 is already prepared for claim default/gpu, and one of the two has it alone: "; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("a claim for the whole device beside shares: %v", err)
	}
	admin := shareOf("gpu", nvDev, "5e5e5e5e-0000-4000-8000-0000000000ad", "1Gi")
	admin.AdminAccess = ptr.To(true)
	p, err := PlanPrepare(claim(uid1, admin), node, devs, inv, cp)
	if err != nil {
		t.Fatalf("admin access beside shares: %v", err)
	}
	cp.Claims[uid1] = p.Prepared
	if got := cp.Promised(); got["0x4486d1"] != 6<<30 {
		t.Errorf("Promised with a monitoring claim = %v: admin access holds nothing", got)
	}
}

// Two shares of one device in one claim (two requests) are one CDI
// device with the sum; a claim with several devices gets no WSL_GPU_DRA_*
// variables (the metadata files list them), one metadata file per request.
func TestPlanPrepareSeveralShares(t *testing.T) {
	inv := inventory(t, "nvidia-laptop")
	devs := Track(nil, inv, nil, t0)
	c := claim(uid1, shareOf("a", nvDev, uid2, "1Gi"), shareOf("b", nvDev, "0a0b0c0d-0000-4000-8000-000000000009", "512Mi"))
	p, err := PlanPrepare(c, node, devs, inv, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(p.Prepared.Spec.Devices); n != 1 {
		t.Fatalf("%d CDI devices, want 1", n)
	}
	e := p.Prepared.Spec.Devices[0].ContainerEdits
	if !slices.Contains(e.Env, "WSL_GPU_DRA_MEMORY=1610612736") {
		t.Errorf("env %v: want the sum of the two shares", e.Env)
	}
	if len(e.Mounts) != 2 || !slices.Equal(slices.Sorted(maps.Keys(p.Prepared.Metadata)), []string{"a", "b"}) {
		t.Errorf("mounts %+v, metadata for %v: want one per request", e.Mounts, slices.Collect(maps.Keys(p.Prepared.Metadata)))
	}

	two := claim(uid1, shareOf("gpu", nvDev, uid2, "1Gi"), shareOf("gpu", igDev, "0a0b0c0d-0000-4000-8000-000000000009", "1Gi"))
	p, err = PlanPrepare(two, node, devs, inv, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range p.Prepared.Spec.Devices {
		for _, v := range d.ContainerEdits.Env {
			if strings.HasPrefix(v, "WSL_GPU_DRA_") {
				t.Errorf("device %s of a two-device claim sets %s", d.Name, v)
			}
		}
	}
	if len(p.Prepared.Metadata) != 1 || strings.Count(p.Prepared.Metadata["gpu"], `"driver": "gpu.wsl-gpu-hook.dev"`) != 2 {
		t.Errorf("metadata %v: want one file listing both devices", p.Prepared.Metadata)
	}
}

// The metadata file is KEP-5304's: the library consumers use decodes and
// validates it; it says which firstAvailable alternative won and what the
// claim got; the spec mounts it where the pod looks (the pod's claim name
// for a template's claim, else the claim's name).
func TestPlanPrepareMetadata(t *testing.T) {
	inv := inventory(t, "nvidia-laptop")
	devs := Track(nil, inv, nil, t0)
	fromTemplate := claim(uid1, shareOf("gpu/discrete", nvDev, uid2, "4Gi"))
	fromTemplate.Name = "fallback-gpu-x7k2p"
	fromTemplate.Annotations = map[string]string{resourceapi.PodResourceClaimAnnotation: "gpu"}
	named := claim(uid1, ours("gpu", nvDev))
	named.Name = "shared"
	for _, tt := range []struct {
		name      string
		claim     *resourceapi.ResourceClaim
		mount     string
		request   string
		memory    int64
		shareID   string
		podClaim  string
		envChosen string
	}{
		{"from a template", fromTemplate, "/var/run/kubernetes.io/dra-device-attributes/resourceclaimtemplates/gpu/gpu/gpu.wsl-gpu-hook.dev-metadata.json", "gpu/discrete", 4 << 30, uid2, "gpu", "WSL_GPU_DRA_REQUEST=gpu/discrete"},
		{"by name", named, "/var/run/kubernetes.io/dra-device-attributes/resourceclaims/shared/gpu/gpu.wsl-gpu-hook.dev-metadata.json", "gpu", 6 << 30, "", "", "WSL_GPU_DRA_REQUEST=gpu"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, err := PlanPrepare(tt.claim, node, devs, inv, nil)
			if err != nil {
				t.Fatal(err)
			}
			e := p.Prepared.Spec.Devices[0].ContainerEdits
			if len(e.Mounts) != 1 || e.Mounts[0].ContainerPath != tt.mount || e.Mounts[0].HostPath != MetadataFile(node.MetadataDir, uid1, "gpu") ||
				!slices.Equal(e.Mounts[0].Options, []string{"ro", "nosuid", "nodev", "noexec", "bind"}) {
				t.Errorf("mounts = %+v, want %s read-only", e.Mounts, tt.mount)
			}
			if !slices.Contains(e.Env, tt.envChosen) {
				t.Errorf("env %v lacks %s", e.Env, tt.envChosen)
			}
			var m metadata.DeviceMetadata
			var invalid error
			if err := devicemetadata.DecodeMetadataFromStream(json.NewDecoder(strings.NewReader(p.Prepared.Metadata["gpu"])), &m,
				devicemetadata.DecodeMetadataWithValidationResult(&invalid)); err != nil || invalid != nil {
				t.Fatalf("decode: %v, validation: %v\n%s", err, invalid, p.Prepared.Metadata["gpu"])
			}
			if m.Name != tt.claim.Name || m.Namespace != "default" || string(m.UID) != uid1 || ptr.Deref(m.PodClaimName, "") != tt.podClaim ||
				len(m.Requests) != 1 || m.Requests[0].Name != tt.request || len(m.Requests[0].Devices) != 1 {
				t.Fatalf("metadata = %+v", m)
			}
			d := m.Requests[0].Devices[0]
			attr := d.Attributes
			if d.Driver != DriverName || d.Pool != pool || d.Name != nvDev || ptr.Deref(attr[AttrMemory].IntValue, -1) != tt.memory ||
				ptr.Deref(attr[AttrShareID].StringValue, "") != tt.shareID || ptr.Deref(attr[AttrLUID].StringValue, "") != "0x4486d1" ||
				ptr.Deref(attr[AttrDescription].StringValue, "") != "NVIDIA GeForce RTX 3060 Laptop GPU" {
				t.Errorf("device = %+v", d)
			}
		})
	}
}
