package dra

import (
	"errors"
	"fmt"

	resourceapi "k8s.io/api/resource/v1"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/cdiselect"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/cdispec"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/driverstore"
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

// PlanPrepare decides what preparing claim on this node means: the
// devices the scheduler allocated from pool to this driver, each one the
// host lists now with a usable driver store folder, and none already
// prepared for another claim unless one of the two has admin access; a
// claim carrying opaque parameters for this driver fails (it takes none).
// The spec selects each adapter by its LUID (exact for this boot) and
// names no folder: the hook binds the adapter's current folder at each
// container start. Planning twice from the same state gives the same plan:
// prepare is idempotent.
func PlanPrepare(claim *resourceapi.ResourceClaim, pool string, devs []Device, inv *driverstore.Inventory, cp *Checkpoint, opt cdispec.Options) (*Plan, error) {
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
	var named []cdispec.Named
	done := map[string]bool{}
	for _, r := range claim.Status.Allocation.Devices.Results {
		if r.Driver != DriverName {
			continue
		}
		if r.Pool != pool {
			return fail(fmt.Errorf("device %s was allocated from pool %q, and this node's pool is %q: the claim belongs to another node", r.Device, r.Pool, pool))
		}
		d, ok := Lookup(devs, r.Device)
		if !ok {
			return fail(fmt.Errorf("device %s is not one this node has published: delete the claim so it is allocated again", r.Device))
		}
		if !d.Healthy() {
			return fail(errors.New(d.Problem))
		}
		admin := r.AdminAccess != nil && *r.AdminAccess
		if !admin {
			if other, ok := holder(cp, uid, d.Name); ok {
				return fail(fmt.Errorf("device %s is already prepared for claim %s/%s: one device serves one claim; to share it, let the pods reference one ResourceClaim", d.Name, other.Namespace, other.Name))
			}
		}
		pd := PreparedDevice{Request: r.Request, Pool: r.Pool, Device: d.Name, LUID: d.Adapter.LUID.String(), AdminAccess: admin, CDIDevice: CDIDevice(uid, d.Name)}
		p.Prepared.Devices = append(p.Prepared.Devices, pd)
		if !done[d.Name] {
			done[d.Name] = true
			named = append(named, cdispec.Named{Name: uid + "-" + d.Name, Selection: selection(d.Adapter)})
		}
	}
	if len(p.Prepared.Devices) == 0 {
		return fail(fmt.Errorf("no device of driver %s is allocated to it", DriverName))
	}
	spec, err := cdispec.Transient(CDIKind, named, inv, opt)
	if err != nil {
		return fail(err)
	}
	p.Prepared.Spec = spec
	return p, nil
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

// holder finds another claim that has device prepared without admin
// access.
func holder(cp *Checkpoint, uid, device string) (Prepared, bool) {
	if cp == nil {
		return Prepared{}, false
	}
	for _, other := range sortedKeys(cp.Claims) {
		if other == uid {
			continue
		}
		for _, d := range cp.Claims[other].Devices {
			if d.Device == device && !d.AdminAccess {
				return cp.Claims[other], true
			}
		}
	}
	return Prepared{}, false
}
