package cdispec

import (
	cdi "tags.cncf.io/container-device-interface/specs-go"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/driverstore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/cdiselect"
)

// Named is one device of a transient spec: its CDI name and what it selects.
type Named struct {
	Name      string
	Selection cdiselect.Selection
}

// Transient builds a spec of kind for devices whose life is tied to
// something else (a DRA claim): the same top-level edits as Generate's
// specs (the node, the lib dir) and Generate's devices (a selection
// variable and the hook that takes the selection as its argument), so it
// too names no driver store folder, survives a driver update and works in
// pods with a user namespace of their own. inv gives the vendor stacks'
// extra edits, as Generate does.
func Transient(kind string, devices []Named, inv *driverstore.Inventory, opt Options) (*cdi.Spec, error) {
	s := newSpec(kind, opt)
	for _, d := range devices {
		s.Devices = append(s.Devices, device(kind, d.Name, d.Selection, inv, opt))
	}
	if err := finish(s); err != nil {
		return nil, err
	}
	return s, nil
}
