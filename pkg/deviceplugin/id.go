package deviceplugin

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/cdispec"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/driverstore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/dxcore"
)

// folderHash is the suffix Windows gives a driver store folder: the same
// .inf installed again (a driver update) gets a new one.
var folderHash = regexp.MustCompile(`_[0-9a-f]{16}$`)

// infName is the driver store folder the host names for a, lowercased and
// without its hash: stable across driver updates of the same package.
// "nofolder" when the host's path names no folder.
func infName(a dxcore.Adapter) string {
	name, err := driverstore.FolderName(a.DriverStorePath)
	if err != nil {
		return "nofolder"
	}
	// A nested name keeps only its last component, the folder itself.
	name = strings.ToLower(name[strings.LastIndex(name, "/")+1:])
	return sanitize(folderHash.ReplaceAllString(name, ""))
}

// sanitize keeps an ID to the characters every tool prints unquoted.
func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case 'a' <= r && r <= 'z', '0' <= r && r <= '9', r == '.', r == '_', r == '-':
			return r
		}
		return '_'
	}, s)
}

// idKey is everything in a device ID but the ordinal.
func idKey(a dxcore.Adapter, v driverstore.Vendor) string {
	return fmt.Sprintf("%s-%04x-%04x-%04x%04x-%s", v, a.PCI.Vendor, a.PCI.Device, a.PCI.SubSystem, a.PCI.SubVendor, infName(a))
}

// adapterIDs returns each adapter's device ID (replica suffix aside), in
// the order given, which must be host order: the ordinal counts identical
// adapters before it. Software adapters, never advertised, get "" and do
// not count.
func adapterIDs(adapters []driverstore.Adapter) []string {
	seen := map[string]int{}
	ids := make([]string, len(adapters))
	for i, a := range adapters {
		if a.Type.Software() {
			continue
		}
		k := idKey(a.Adapter, a.Vendor)
		ids[i] = k + "-" + strconv.Itoa(seen[k])
		seen[k]++
	}
	return ids
}

// replicaID names replica r of adapter device id when replicas > 1.
func replicaID(id string, r, replicas int) string {
	if replicas <= 1 {
		return id
	}
	return id + "::" + strconv.Itoa(r)
}

// CDI kinds of the spec `wsl-gpu-hook cdi` writes.
const (
	CDIKindNVIDIA  = cdispec.NVIDIAKind
	CDIKindAMD     = cdispec.AMDKind
	CDIKindGeneric = cdispec.Kind
)

// CDIName is the fully qualified CDI device name of an adapter: for NVIDIA
// and AMD the adapter's position among that vendor's adapters in host order
// (what --gpus and existing manifests mean by "GPU 0"), for any other
// vendor the adapter's host index under the project's own kind. The CDI
// spec generator names its devices the same way; keep both in step.
func CDIName(v driverstore.Vendor, index, vendorIndex int) string {
	switch v {
	case driverstore.NVIDIA:
		return CDIKindNVIDIA + "=" + strconv.Itoa(vendorIndex)
	case driverstore.AMD:
		return CDIKindAMD + "=" + strconv.Itoa(vendorIndex)
	}
	return CDIKindGeneric + "=" + strconv.Itoa(index)
}
