package dra

import (
	"errors"
	"fmt"
	"slices"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"
	cdi "tags.cncf.io/container-device-interface/specs-go"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/driverstore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/setup/cdispec"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/cdiselect"
)

// CDI vendor and class of the claims' specs: one transient spec per claim,
// written at prepare and removed at unprepare, whose devices are named
// <claim UID>-<device>, never reused, as the kubelet plugin library asks.
const (
	cdiVendor = DriverName
	cdiClass  = "claim"
	// CDIKind is the kind of every claim spec.
	CDIKind = cdiVendor + "/" + cdiClass
)

// CDIDevice is the CDI device a claim's device is prepared as.
func CDIDevice(uid, device string) string { return CDIKind + "=" + uid + "-" + device }

// SpecFile is the base name of a claim's spec in the CDI dir.
func SpecFile(uid string) string {
	return cdiapi.GenerateTransientSpecName(cdiVendor, cdiClass, uid) + ".json"
}

// Plan is what preparing one claim does: remember Prepared in the
// checkpoint and write its Spec as its SpecFile.
type Plan struct {
	UID      string
	Prepared Prepared
}

// PrepareError is a claim that cannot be prepared; its message is the one
// line the pod's events show.
type PrepareError struct {
	Namespace, Name string
	Err             error
}

func (e *PrepareError) Error() string {
	return fmt.Sprintf("claim %s/%s: %v", e.Namespace, e.Name, e.Err)
}

func (e *PrepareError) Unwrap() error { return e.Err }

// Node is what preparing a claim needs to know of this node.
type Node struct {
	// Pool is this node's pool: the node's name.
	Pool string
	// Spec is what the claims' specs point at (node, lib dir, hook).
	Spec cdispec.Options
	// MetadataDir is the host dir of the claims' metadata files.
	MetadataDir string
	// Sharing is how the devices are published.
	Sharing Sharing
}

// PlanPrepare decides what preparing claim on this node means: the
// devices the scheduler allocated from the node's pool to this driver,
// each one the host lists now with a usable driver store folder; a claim
// carrying opaque parameters for this driver fails (it takes none). A
// device already prepared for another claim is refused unless both have a
// share of it (consumable capacity: the scheduler kept their sum within
// its memory) or one of the two has admin access.
//
// The spec has one device per allocated device, selecting its adapter by
// LUID (exact for this boot) and naming no folder: the hook binds the
// adapter's current folder at each container start. Each request's
// devices are described in a metadata file (KEP-5304) the spec mounts
// where the pod looks for it, and a claim with one device also says what
// it got in WSL_GPU_DRA_* variables. Planning twice from the same state
// gives the same plan: prepare is idempotent.
func PlanPrepare(claim *resourceapi.ResourceClaim, node Node, devs []Device, inv *driverstore.Inventory, cp *Checkpoint) (*Plan, error) {
	fail := func(err error) (*Plan, error) {
		return nil, &PrepareError{Namespace: claim.Namespace, Name: claim.Name, Err: err}
	}
	uid := string(claim.UID)
	if err := ValidUID(uid); err != nil {
		return fail(err)
	}
	if claim.Status.Allocation == nil {
		return fail(errors.New("not allocated: the scheduler has not placed it yet"))
	}
	if err := checkParams(claim.Status.Allocation.Devices.Config); err != nil {
		return fail(err)
	}
	p := &Plan{UID: uid, Prepared: Prepared{Namespace: claim.Namespace, Name: claim.Name, SpecFile: SpecFile(uid)}}
	var got []claimDevice
	for _, r := range claim.Status.Allocation.Devices.Results {
		if r.Driver != DriverName {
			continue
		}
		if r.Pool != node.Pool {
			return fail(fmt.Errorf("device %s was allocated from pool %q, and this node's pool is %q: the claim belongs to another node", r.Device, r.Pool, node.Pool))
		}
		d, ok := Lookup(devs, r.Device)
		if !ok {
			return fail(fmt.Errorf("device %s is not one this node has published: delete the claim so it is allocated again", r.Device))
		}
		if !d.Healthy() {
			return fail(errors.New(d.Problem))
		}
		pd := PreparedDevice{
			Request: r.Request, Pool: r.Pool, Device: d.Name, LUID: d.Adapter.LUID.String(),
			AdminAccess: r.AdminAccess != nil && *r.AdminAccess, CDIDevice: CDIDevice(uid, d.Name),
			Memory: Memory(d.Adapter),
		}
		if r.ShareID != nil {
			pd.ShareID = string(*r.ShareID)
			q := r.ConsumedCapacity[CapacityMemory]
			pd.Memory = q.Value()
		}
		if !pd.AdminAccess {
			if other, ok := holder(cp, uid, pd); ok {
				return fail(fmt.Errorf("device %s is already prepared for claim %s/%s, and one of the two has it alone: to share an adapter, ask for part of its memory (capacity.requests.memory) with the driver's sharing on, or let the pods reference one ResourceClaim", d.Name, other.Namespace, other.Name))
			}
		}
		p.Prepared.Devices = append(p.Prepared.Devices, pd)
		got = append(got, claimDevice{request: r.Request, device: d, pool: r.Pool, shareID: pd.ShareID, memory: pd.Memory})
	}
	if len(got) == 0 {
		return fail(fmt.Errorf("no device of driver %s is allocated to it", DriverName))
	}
	spec, err := buildSpec(uid, claim, got, inv, node)
	if err != nil {
		return fail(err)
	}
	p.Prepared.Spec = spec
	// One metadata file per request, with every device it got.
	byRequest := map[string][]claimDevice{}
	for _, c := range got {
		req := resourceclaim.BaseRequestRef(c.request)
		byRequest[req] = append(byRequest[req], c)
	}
	for req, cs := range byRequest {
		data, err := metadataFor(claim, cs, node.Sharing)
		if err != nil {
			return fail(err)
		}
		if p.Prepared.Metadata == nil {
			p.Prepared.Metadata = map[string]string{}
		}
		p.Prepared.Metadata[req] = string(data)
	}
	return p, nil
}

// buildSpec is the claim's CDI spec: one device per allocated device
// (several shares of one device in one claim are one CDI device, with the
// sum of their memory), each request's metadata file mounted on its first
// device, and the WSL_GPU_DRA_* variables when there is one device.
func buildSpec(uid string, claim *resourceapi.ResourceClaim, got []claimDevice, inv *driverstore.Inventory, node Node) (*cdi.Spec, error) {
	var named []cdispec.Named
	var order []string
	merged := map[string]claimDevice{}
	for _, c := range got {
		if m, ok := merged[c.device.Name]; ok {
			m.memory += c.memory
			merged[c.device.Name] = m
			continue
		}
		merged[c.device.Name] = c
		order = append(order, c.device.Name)
		named = append(named, cdispec.Named{Name: uid + "-" + c.device.Name, Selection: selection(c.device.Adapter)})
	}
	spec, err := cdispec.Transient(CDIKind, named, inv, node.Spec)
	if err != nil {
		return nil, err
	}
	if len(order) == 1 {
		e := &spec.Devices[0].ContainerEdits
		e.Env = append(e.Env, merged[order[0]].env()...)
	}
	mounted := map[string]bool{}
	for _, c := range got {
		req := resourceclaim.BaseRequestRef(c.request)
		if mounted[req] {
			continue
		}
		mounted[req] = true
		i := slices.Index(order, c.device.Name)
		e := &spec.Devices[i].ContainerEdits
		e.Mounts = append(e.Mounts, &cdi.Mount{
			HostPath:      MetadataFile(node.MetadataDir, uid, req),
			ContainerPath: metadataMount(claim, req),
			Options:       []string{"ro", "nosuid", "nodev", "noexec", "bind"},
		})
	}
	return spec, nil
}

// selection names the adapter exactly: by LUID, which a host that removes
// and re-adds an adapter changes, so a container restarted later never
// gets another adapter under the old name.
func selection(a driverstore.Adapter) cdiselect.Selection {
	if a.LUID.Uint64() == 0 {
		return cdiselect.Selection{Index: a.Index}
	}
	return cdiselect.Selection{LUID: a.LUID, Index: -1}
}

// holder finds another claim that has pd's device prepared so that the
// two cannot both have it: neither with admin access, and at least one
// not a share.
func holder(cp *Checkpoint, uid string, pd PreparedDevice) (Prepared, bool) {
	if cp == nil {
		return Prepared{}, false
	}
	for _, other := range sortedKeys(cp.Claims) {
		if other == uid {
			continue
		}
		for _, d := range cp.Claims[other].Devices {
			if d.Device == pd.Device && !d.AdminAccess && (d.ShareID == "" || pd.ShareID == "") {
				return cp.Claims[other], true
			}
		}
	}
	return Prepared{}, false
}
