package deviceplugin

import (
	"strconv"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/driverstore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/setup/cdispec"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/vendors"
)

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

// CDIName is the fully qualified CDI device name of an adapter: for a
// vendor with a CDI kind (NVIDIA, AMD: package vendors) the adapter's position among that vendor's adapters in host order
// (what --gpus and existing manifests mean by "GPU 0"), for any other
// vendor the adapter's host index under the project's own kind. The CDI
// spec generator names its devices the same way; keep both in step.
func CDIName(v driverstore.Vendor, index, vendorIndex int) string {
	if kind := vendors.RowOf(v).CDIKind; kind != "" && v != vendors.Unknown {
		return kind + "=" + strconv.Itoa(vendorIndex)
	}
	return CDIKindGeneric + "=" + strconv.Itoa(index)
}
