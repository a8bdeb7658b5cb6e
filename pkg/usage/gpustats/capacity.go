package gpustats

import (
	"errors"
	"fmt"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/driverstore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/dxcore"
)

// AdapterMemory is what a resource publisher (the DRA driver) needs of an
// adapter's memory.
type AdapterMemory struct {
	LUID dxcore.LUID
	// Local is the adapter's own memory in bytes (0 on an integrated GPU),
	// NonLocal the system memory it can map; Budget is the OS budget for
	// one process in the main group.
	Local, NonLocal, Budget uint64
}

// Capacity reads every adapter's memory sizes once: ADAPTER, one SEGMENT
// per segment and one QUERYVIDEOMEMORYINFO per adapter after the
// enumeration. Adapters whose queries fail are left out and returned in
// errs by LUID.
func Capacity(device string) ([]AdapterMemory, map[dxcore.LUID]error, error) {
	s, err := dxcore.OpenSession(device)
	if err != nil {
		return nil, nil, err
	}
	defer s.Close()
	var out []AdapterMemory
	errs := map[dxcore.LUID]error{}
	for _, a := range s.Adapters() {
		m, err := adapterMemory(s, a.LUID)
		if err != nil {
			errs[a.LUID] = err
			continue
		}
		out = append(out, m)
	}
	return out, errs, nil
}

func adapterMemory(s *dxcore.Session, luid dxcore.LUID) (AdapterMemory, error) {
	m := AdapterMemory{LUID: luid}
	c, err := s.Counts(luid)
	if err != nil {
		return m, err
	}
	for id := range c.Segments {
		seg, err := s.Segment(luid, id)
		if err != nil {
			return m, err
		}
		if seg.Aperture {
			m.NonLocal += seg.CommitLimit
		} else {
			m.Local += seg.CommitLimit
		}
	}
	group := dxcore.SegmentGroupLocal
	if m.Local == 0 {
		group = dxcore.SegmentGroupNonLocal
	}
	if v, err := s.VideoMemory(luid, group); err == nil {
		m.Budget = v.Budget
	}
	return m, nil
}

// Unhealthy returns the adapters whose statistics queries fail, by LUID,
// for the device plugin's health check: a removed or hung adapter answers
// DEVICE_REMOVED (ENODEV) or times out there before anything else shows it.
// A kernel without the statistics call is not an adapter fault: it gives
// no entries, only err.
func Unhealthy(device string) (map[dxcore.LUID]error, error) {
	_, errs, err := Capacity(device)
	if err != nil {
		return nil, err
	}
	return healthErrors(errs)
}

func healthErrors(errs map[dxcore.LUID]error) (map[dxcore.LUID]error, error) {
	out := map[dxcore.LUID]error{}
	for luid, err := range errs {
		if errors.Is(err, dxcore.ErrStatsUnsupported) {
			return map[dxcore.LUID]error{}, err
		}
		out[luid] = fmt.Errorf("GPU statistics query failed: %w", err)
	}
	return out, nil
}

// MarkUnhealthy sets Err on every adapter of inv whose statistics queries
// fail (see Unhealthy), unless it already has one: the device plugin and
// `info --k8s` then advertise it unhealthy with that reason. The error
// returned says why no health could be read at all (an old kernel); the
// inventory is then left as it was.
func MarkUnhealthy(inv *driverstore.Inventory, device string) error {
	if inv == nil {
		return nil
	}
	bad, err := Unhealthy(device)
	for i := range inv.Adapters {
		a := &inv.Adapters[i]
		if e, ok := bad[a.LUID]; ok && a.Err == nil {
			a.Err = e
		}
	}
	return err
}
