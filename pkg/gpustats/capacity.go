package gpustats

import "github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/dxcore"

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
