// Package gpuhost reads what the host offers a container, for gpuplan to
// decide from: the adapters the GPU device enumerates, their driver store
// folders, the loader-cache entries of the lib dir and where nvidia-smi is.
//
// It only reads the host; with Options.CacheDir it keeps its answer there
// for the next start, which then checks it instead of asking the Windows
// host again (package probecache). The device node itself is stat'ed by devnode.Stat before,
// because a createContainer hook must allow the node in its own device
// cgroup before it can open it to enumerate (see gpuplan.Container.Cgroup).
package gpuhost

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/devnode"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/driverstore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/dxcore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/dxgsysfs"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/probecache"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/probed"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/wsl"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/ldcache"
)

// Options are the host paths, from the configuration.
type Options struct {
	LibDir, DriversDir string
	// Ldcache scans the lib dir for loader-cache entries; without it the
	// container's cache is left alone.
	Ldcache bool
	// Details also asks each adapter's type and description: the
	// selection variables of a request narrower than all need them
	// (vendorstack: which adapters render, which Intel ones are GPUs,
	// Mesa's adapter name). Three more round trips per adapter.
	Details bool
	// ShortLived: the process holds no other /dev/dxg fd, and closing the
	// enumeration's own fd frees the adapter handles, so no CLOSEADAPTER
	// is sent (dxcore.Options.CloseHandlesWithFD). The hook and the
	// commands are; the device plugin is not.
	ShortLived bool
	// CacheDir, when not "", is where Probe keeps its answer for the
	// next start and looks for the last one (package probecache).
	CacheDir string
	// Sysfs, when not "", is the sysfs root where a cached start reads
	// which devices the GPU driver is bound to (package dxgsysfs): when
	// they are the ones the cache was made with, /dev/dxg is not opened.
	Sysfs string
	// SonameCache, when not "", is a directory on disk where the lib dir's
	// SONAMEs are kept for the next boot's first probe (probecache.Sonames):
	// it then stats each library instead of reading its ELF headers. A
	// directory that does not exist is not made: nothing is kept.
	SonameCache string
	// Note, when set, hears what went wrong with the SONAME file, which
	// does not stop the probe, for the log.
	Note func(error)
	// Cached, when set, hears whether the cache answered and, if not,
	// why (nil when there was no cache to use), for the log.
	Cached func(hit bool, miss error)
	// Resources (List only) also asks each adapter's driver version and
	// memory sizes: two more round trips per adapter, for the DRA driver.
	Resources bool
}

// Probe enumerates the adapters behind node and reads the driver store.
// Adapters the enumeration had to skip are returned for the log. It asks
// the host only what the decision uses (ids and driver store path), as it
// runs on every container start; info asks for the details.
//
// With o.CacheDir it first checks the cached answer of an earlier start
// (package probecache): if the boot, the paths, the lib dir's and drivers
// dir's stats and the listed adapters' LUIDs are unchanged, no adapter is
// queried and nothing else is read; otherwise it probes and caches the
// answer when every adapter resolved. With o.Sysfs too, the devices the
// driver is bound to stand in for the listing when the cache was made
// with the same ones and they named every adapter then: /dev/dxg is not
// opened at all.
func Probe(node devnode.Node, o Options) (probed.Host, []error, error) {
	if o.CacheDir == "" {
		return probe(node, o, nil)
	}
	libDir, driversDir := o.LibDir, o.DriversDir
	if libDir == "" {
		libDir = driverstore.DefaultLibDir
	}
	if driversDir == "" {
		driversDir = driverstore.DefaultDriversDir
	}
	now := &probecache.Key{Device: node.Path, LibDir: libDir, DriversDir: driversDir, Details: o.Details, Ldcache: o.Ldcache, Sysfs: o.Sysfs}
	var err error
	// The bound devices are read before the host is asked, as the stamps
	// are: a device that comes or goes meanwhile leaves a reading the
	// next start will not match, or one that does not cover the listing.
	var bound dxgsysfs.Reading
	if o.Sysfs != "" {
		// No reading (not WSL, an older kernel) only means asking /dev/dxg.
		if r, err := dxgsysfs.Read(o.Sysfs); err == nil {
			bound, now.Bound = r, r.Stamp
		}
	}
	if now.BootID, err = probecache.BootID(); err == nil {
		// Stamps are taken before the host is asked: a change while it
		// is asked leaves a stamp the next start will not match.
		if now.Lib, err = probecache.StampOf(libDir); err == nil {
			now.Drivers, err = probecache.StampOf(driversDir)
		}
	}
	if err != nil || !now.Lib.IsReadableDir() {
		// The probe reports what is wrong with the dirs.
		return probe(node, o, nil)
	}
	path := probecache.Path(o.CacheDir, now)
	cachedKey, cached, miss := probecache.Load(path, now)
	if cached != nil && cachedKey.Listed(now) {
		if o.Cached != nil {
			o.Cached(true, nil)
		}
		return cached.Host(node, now), nil, nil
	}
	known := func(luids []dxcore.LUID) bool {
		now.LUIDs = probecache.LUIDs(luids)
		if cached == nil {
			return false
		}
		if !cachedKey.Serves(now) {
			miss = fmt.Errorf("adapters changed: %w", probecache.ErrStale)
			return false
		}
		return true
	}
	h, skipped, err := probe(node, o, known)
	if err != nil {
		return h, skipped, err
	}
	// The reading may stand in for the listing next time only if it named
	// every adapter the listing found (see dxgsysfs).
	now.Bound = ""
	if bound.Covers(now.LUIDs) {
		now.Bound = bound.Stamp
	}
	if h.Inventory == nil {
		if o.Cached != nil {
			o.Cached(true, nil)
		}
		if now.Bound != "" && cachedKey.Bound == "" {
			// Made without a usable reading: with one now, the next
			// start need not open /dev/dxg. The file keeps what it was
			// made with (details, loader entries) that this start may
			// not have asked for.
			upgraded := *cachedKey
			upgraded.Bound = now.Bound
			saveCache(path, &upgraded, cached, o.Cached)
		}
		return cached.Host(node, now), nil, nil
	}
	if o.Cached != nil {
		o.Cached(false, miss)
	}
	if p, perr := probecache.FromHost(h); perr == nil && len(skipped) == 0 {
		saveCache(path, now, p, o.Cached)
	}
	return h, skipped, nil
}

// saveCache keeps the probe for the next start. A hook in a user
// namespace of its own only reads the cache (probecache.ErrReadOnly):
// that is no news.
func saveCache(path string, k *probecache.Key, p *probecache.Probe, cached func(bool, error)) {
	if err := probecache.Save(path, k, p); err != nil && !errors.Is(err, probecache.ErrReadOnly) && cached != nil {
		cached(false, err)
	}
}

// probe asks the host; known, when set, is dxcore.Options.Known, and when
// it recognises the adapters probe returns a Host with no Inventory.
func probe(node devnode.Node, o Options, known func([]dxcore.LUID) bool) (probed.Host, []error, error) {
	h := probed.Host{Node: node}
	enum, err := dxcore.EnumerateWith(node.Path, dxcore.Options{Details: o.Details, CloseHandlesWithFD: o.ShortLived, Known: known})
	if err != nil {
		return h, nil, err
	}
	if enum.Listed {
		return h, nil, nil
	}
	var skipped []error
	for _, s := range enum.Skipped {
		skipped = append(skipped, s)
	}
	h.Inventory, err = driverstore.Build(enum.Adapters, driverstore.Options{LibDir: o.LibDir, DriversDir: o.DriversDir})
	if err != nil {
		return h, skipped, err
	}
	h.NvidiaSmi = driverstore.FindNvidiaSmi(h.Inventory)
	if o.Ldcache {
		if h.Ldcache, err = ldcacheEntries(h.Inventory.LibDir, o); err != nil {
			return h, skipped, err
		}
	}
	return h, skipped, nil
}

// ldcacheEntries is LdcacheEntries with the SONAMEs kept in
// o.SonameCache, which it updates when the lib dir changed.
func ldcacheEntries(libDir string, o Options) ([]ldcache.Entry, error) {
	if o.SonameCache == "" {
		return LdcacheEntries(libDir)
	}
	note := func(err error) {
		if o.Note != nil {
			o.Note(err)
		}
	}
	path := probecache.SonamesPath(o.SonameCache, libDir)
	memo, err := probecache.LoadSonames(path, libDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		note(fmt.Errorf("kept SONAMEs not used, reading the libraries: %w", err))
	}
	entries, err := ldcache.ScanDirMemo(libDir, wsl.LibDir, memo)
	if err != nil {
		return nil, fmt.Errorf("scan %s for the loader cache: %w", libDir, err)
	}
	if memo.Changed() {
		// No directory is no note: it is the package's to make.
		if err := memo.Save(path); err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, probecache.ErrReadOnly) {
			note(fmt.Errorf("keep the SONAMEs of %s: %w", libDir, err))
		}
	}
	if entries == nil {
		entries = []ldcache.Entry{}
	}
	return entries, nil
}

// LdcacheEntries returns the loader-cache entries for the host lib dir as
// the container sees it, never nil: an empty lib dir still gets a cache.
func LdcacheEntries(libDir string) ([]ldcache.Entry, error) {
	entries, err := ldcache.ScanDir(libDir, wsl.LibDir)
	if err != nil {
		return nil, fmt.Errorf("scan %s for the loader cache: %w", libDir, err)
	}
	if entries == nil {
		entries = []ldcache.Entry{}
	}
	return entries, nil
}
