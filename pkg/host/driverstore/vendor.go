package driverstore

import (
	"os"
	"path/filepath"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/dxcore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/vendors"
)

// Vendor names who made an adapter, as users select it ("nvidia"): the
// vendor table's name (package vendors).
type Vendor = vendors.Name

// Vendors the hook tells apart (package vendors holds their table).
const (
	NVIDIA    = vendors.NVIDIA
	AMD       = vendors.AMD
	Intel     = vendors.Intel
	Microsoft = vendors.Microsoft
	Qualcomm  = vendors.Qualcomm
	Unknown   = vendors.Unknown
)

// Vendors lists every vendor the hook tells apart, Unknown last: the names
// a selection, a CDI device or a label may carry.
func Vendors() []Vendor { return vendors.Names() }

// nvidiaMarker is the file only NVIDIA driver store folders hold; its
// presence classifies an adapter the host gave no usable PCI vendor for.
const nvidiaMarker = "libcuda.so.1.1"

// VendorOf classifies a PCI vendor id; ids it does not know are Unknown.
// An adapter's vendor is AdapterVendors', which also looks at its folder.
func VendorOf(pciVendor uint32) Vendor { return vendors.Of(pciVendor) }

// AdapterVendors returns each adapter's vendor as Build gives it, for
// readers that need no folders (the metrics): its PCI vendor's, or, when
// the table does not know that id, NVIDIA if the adapter's driver store
// folder under driversDir ("" means DefaultDriversDir) holds nvidiaMarker.
// The folder is found as Build finds it, never outside driversDir. It
// costs an lstat or two per distinct folder of the adapters whose PCI
// vendor is unknown, and nothing for the others.
func AdapterVendors(adapters []dxcore.Adapter, driversDir string) []Vendor {
	if driversDir == "" {
		driversDir = DefaultDriversDir
	}
	c := newClassifier(driversDir)
	out := make([]Vendor, len(adapters))
	for i, a := range adapters {
		out[i] = c.vendor(a)
	}
	return out
}

// classifier decides adapters' vendors, remembering each folder's marker;
// its resolver is Build's too, so a folder is looked up once for both.
type classifier struct {
	r       *resolver
	markers map[string]bool // by on-disk folder name
}

func newClassifier(driversDir string) classifier {
	return classifier{r: &resolver{driversDir: driversDir, found: map[string]resolved{}}, markers: map[string]bool{}}
}

// vendor is the one derivation of an adapter's vendor (AdapterVendors).
// A folder that is unusable, or a marker that is not a regular file (a
// symlink to anything), leaves the vendor Unknown.
func (c classifier) vendor(a dxcore.Adapter) Vendor {
	if v := VendorOf(a.PCI.Vendor); v != Unknown {
		return v
	}
	name, err := FolderName(a.DriverStorePath)
	if err != nil {
		return Unknown
	}
	res := c.r.resolve(name)
	if res.err != nil {
		return Unknown
	}
	has, ok := c.markers[res.name]
	if !ok {
		fi, err := os.Lstat(filepath.Join(c.r.driversDir, res.name, nvidiaMarker))
		has = err == nil && fi.Mode().IsRegular()
		c.markers[res.name] = has
	}
	if has {
		return NVIDIA
	}
	return Unknown
}

// Kind is what a is for, from its PCI vendor and type flags
// (vendors.Classify): the one place that says "is this a GPU".
func (a Adapter) Kind() vendors.Kind {
	return vendors.Classify(a.PCI.Vendor, a.Vendor, a.Type.ComputeOnly(), a.Type.Software())
}
