package probecache

import (
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"strings"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/devnode"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/driverstore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/dxcore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/probed"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/wsl"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/ldcache"
)

// Probe is what a start learned of the host, as cached.
type Probe struct {
	Adapters  []Adapter
	Folders   []Folder
	NvidiaSmi driverstore.NvidiaSmi
	// Ldcache is nil when the key has no Ldcache.
	Ldcache []ldcache.Entry
}

// Adapter is one inventory adapter, without an error: only probes where
// every adapter resolved are cached.
type Adapter struct {
	dxcore.Adapter
	Vendor   driverstore.Vendor
	Folder   string
	Registry string
}

// Folder is one inventory folder; its host path is the drivers dir's.
type Folder struct {
	Name     string
	Vendor   driverstore.Vendor
	Adapters []int
}

// ErrNotCacheable is FromHost's error for a probe that had to skip an
// adapter or could not resolve a folder: such a start asks again next time.
var ErrNotCacheable = errors.New("the probe skipped an adapter or a folder")

// FromHost takes what the cache keeps from a probe's result.
func FromHost(h probed.Host) (*Probe, error) {
	if h.Inventory == nil {
		return nil, ErrNotCacheable
	}
	p := &Probe{NvidiaSmi: h.NvidiaSmi, Ldcache: h.Ldcache}
	for _, a := range h.Inventory.Adapters {
		if a.Err != nil {
			return nil, ErrNotCacheable
		}
		p.Adapters = append(p.Adapters, Adapter{Adapter: a.Adapter, Vendor: a.Vendor, Folder: a.Folder, Registry: a.Registry})
	}
	for _, f := range h.Inventory.Folders {
		if f.Files != nil {
			return nil, fmt.Errorf("%w: folder listings are not cached", ErrNotCacheable)
		}
		p.Folders = append(p.Folders, Folder{Name: f.Name, Vendor: f.Vendor, Adapters: f.Adapters})
	}
	return p, nil
}

// Host is the probe's result again, for the node and the key's dirs.
func (p *Probe) Host(node devnode.Node, k *Key) probed.Host {
	inv := &driverstore.Inventory{LibDir: k.LibDir, DriversDir: k.DriversDir}
	for _, a := range p.Adapters {
		inv.Adapters = append(inv.Adapters, driverstore.Adapter{Adapter: a.Adapter, Vendor: a.Vendor, Folder: a.Folder, Registry: a.Registry})
	}
	for _, f := range p.Folders {
		inv.Folders = append(inv.Folders, driverstore.Folder{Name: f.Name, HostPath: filepath.Join(k.DriversDir, f.Name), Vendor: f.Vendor, Adapters: f.Adapters})
	}
	return probed.Host{Node: node, Inventory: inv, NvidiaSmi: p.NvidiaSmi, Ldcache: p.Ldcache}
}

// Bounds on what a probe can hold.
const (
	maxAdapters = 64 // D3DKMT_ADAPTERS_MAX
	maxEntries  = 32768
	maxString   = 4096
	maxBound    = 64 << 10 // two listings of up to 1024 entries
)

// validate checks that p is something a probe under k could have made:
// the file is root's, but a bug, a half-written file from an older format
// or a hand edit must not steer what the hook mounts.
func (p *Probe) validate(k *Key) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("not a probe: "+format, args...)
	}
	for _, d := range []string{k.Device, k.LibDir, k.DriversDir} {
		if !filepath.IsAbs(d) || filepath.Clean(d) != d {
			return bad("path %q is not clean and absolute", d)
		}
	}
	if k.Sysfs != "" && (!filepath.IsAbs(k.Sysfs) || filepath.Clean(k.Sysfs) != k.Sysfs) {
		return bad("sysfs root %q is not clean and absolute", k.Sysfs)
	}
	if k.Bound != "" && k.Sysfs == "" || len(k.Bound) > maxBound {
		return bad("a %d-byte bound-devices stamp for sysfs root %q", len(k.Bound), k.Sysfs)
	}
	if len(k.LUIDs) == 0 || len(k.LUIDs) > maxAdapters || len(p.Adapters) != len(k.LUIDs) {
		return bad("%d adapters for %d LUIDs", len(p.Adapters), len(k.LUIDs))
	}
	if len(p.Folders) > len(p.Adapters) {
		return bad("%d folders for %d adapters", len(p.Folders), len(p.Adapters))
	}
	folders := map[string]int{}
	for i, f := range p.Folders {
		if err := checkFolderName(f.Name); err != nil {
			return bad("folder %d: %v", i, err)
		}
		if _, dup := folders[f.Name]; dup {
			return bad("folder %q twice", f.Name)
		}
		if !f.Vendor.Known() {
			return bad("folder %q: vendor %q", f.Name, f.Vendor)
		}
		folders[f.Name] = i
		if len(f.Adapters) == 0 || len(f.Adapters) > len(p.Adapters) {
			return bad("folder %q used by %d adapters", f.Name, len(f.Adapters))
		}
	}
	used := map[string]int{}
	for i, a := range p.Adapters {
		if a.Index != i || a.LUID.Uint64() != k.LUIDs[i] {
			return bad("adapter %d is index %d, LUID %s", i, a.Index, a.LUID)
		}
		if !a.Vendor.Known() || len(a.Description) > maxString || len(a.DriverStorePath) > maxString || len(a.Registry) > maxString {
			return bad("adapter %d: bad vendor or oversized text", i)
		}
		if a.Vendor != driverstore.VendorOf(a.PCI.Vendor) && !(a.Vendor == driverstore.NVIDIA && driverstore.VendorOf(a.PCI.Vendor) == driverstore.Unknown) {
			return bad("adapter %d: vendor %q for PCI vendor 0x%x", i, a.Vendor, a.PCI.Vendor)
		}
		fi, ok := folders[a.Folder]
		if !ok {
			return bad("adapter %d: folder %q is not listed", i, a.Folder)
		}
		if name, err := driverstore.FolderName(a.DriverStorePath); err != nil || name != a.Registry || !strings.EqualFold(name, a.Folder) {
			return bad("adapter %d: driver store path %q does not name folder %q", i, a.DriverStorePath, a.Folder)
		}
		if !contains(p.Folders[fi].Adapters, i) {
			return bad("adapter %d: folder %q does not list it", i, a.Folder)
		}
		used[a.Folder]++
	}
	for _, f := range p.Folders {
		if used[f.Name] != len(f.Adapters) {
			return bad("folder %q lists adapters that do not use it", f.Name)
		}
	}
	for _, name := range p.NvidiaSmi.Folders {
		if fi, ok := folders[name]; !ok || p.Folders[fi].Vendor != driverstore.NVIDIA {
			return bad("nvidia-smi in folder %q, not an NVIDIA folder", name)
		}
	}
	if !k.Ldcache && p.Ldcache != nil {
		return bad("loader entries without the loader-cache probe")
	}
	if k.Ldcache && p.Ldcache == nil {
		return bad("no loader entries for the loader-cache probe")
	}
	if len(p.Ldcache) > maxEntries {
		return bad("%d loader entries", len(p.Ldcache))
	}
	for i, e := range p.Ldcache {
		name, ok := strings.CutPrefix(e.Path, wsl.LibDir+"/")
		if e.Key == "" || len(e.Key) > maxString || strings.ContainsAny(e.Key, "/\x00") ||
			!ok || name == "" || strings.ContainsAny(name, "/\x00") || name == "." || name == ".." ||
			e.Flags != ldcache.FlagNative || e.OSVersion != 0 || e.HWCap != 0 || e.HWCapsSubdir != "" {
			return bad("loader entry %d (%q -> %q) is not one a lib dir scan makes", i, e.Key, e.Path)
		}
	}
	return nil
}

// checkFolderName accepts a folder name as the driver store resolution
// makes it: relative, clean, no component escaping the drivers dir.
func checkFolderName(name string) error {
	if name == "" || len(name) > maxString || path.IsAbs(name) || path.Clean(name) != name || strings.ContainsRune(name, 0) {
		return fmt.Errorf("name %q", name)
	}
	for _, c := range strings.Split(name, "/") {
		if c == ".." || c == "." {
			return fmt.Errorf("name %q", name)
		}
	}
	return nil
}

func contains(xs []int, x int) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
