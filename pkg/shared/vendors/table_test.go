package vendors_test

import (
	"testing"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/vendors"
)

// Every id names a vendor of the table, once.
func TestIDsNameRows(t *testing.T) {
	seen := map[uint32]bool{}
	for _, id := range vendors.IDs() {
		if seen[id.ID] || !id.Vendor.Known() || id.Vendor == vendors.Unknown {
			t.Errorf("id %#x: vendor %q, seen before %v", id.ID, id.Vendor, seen[id.ID])
		}
		seen[id.ID] = true
	}
}
