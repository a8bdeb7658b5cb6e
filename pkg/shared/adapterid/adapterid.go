package adapterid

import (
	"fmt"
	"strconv"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/driverstore"
)

// ID is one adapter's identity.
type ID struct {
	// Name is stable across WSL boots and driver updates (see the
	// package doc).
	Name   string
	Vendor driverstore.Vendor
	Kind   Kind
}

// Of returns the identity of each adapter, in the order given, which must
// be the host's: n counts identical adapters before each one.
func Of(adapters []driverstore.Adapter) []ID {
	seen := map[string]int{}
	ids := make([]ID, len(adapters))
	for i, a := range adapters {
		k := key(a)
		ids[i] = ID{Name: k + "-" + strconv.Itoa(seen[k]), Vendor: a.Vendor, Kind: KindOf(a)}
		seen[k]++
	}
	return ids
}

// key is an ID's name without its ordinal.
func key(a driverstore.Adapter) string {
	return fmt.Sprintf("%s-%s-%04x%04x", a.Vendor, Hex(a.PCI.Device), a.PCI.SubSystem&0xffff, a.PCI.SubVendor&0xffff)
}

// Hex prints a PCI id in 4 hex digits, or 8 for the wider ACPI ids.
func Hex(v uint32) string {
	if v > 0xffff {
		return fmt.Sprintf("%08x", v)
	}
	return fmt.Sprintf("%04x", v)
}
