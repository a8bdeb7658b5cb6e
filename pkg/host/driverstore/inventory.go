package driverstore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/dxcore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/wsl"
)

// Where WSL mounts the GPU libraries and the Windows driver store.
const (
	DefaultLibDir     = wsl.LibDir
	DefaultDriversDir = wsl.DriversDir
)

// Options tunes Build.
type Options struct {
	LibDir     string // "" means DefaultLibDir
	DriversDir string // "" means DefaultDriversDir
	// ListFiles fills Inventory.LibFiles and Folder.Files, reading every
	// file's ELF header: for reports, not for the hook's hot path.
	ListFiles bool
}

// Folder is one driver store folder, shared by all adapters using it.
type Folder struct {
	Name     string // relative to the drivers dir, as it is on disk
	HostPath string // DriversDir joined with Name
	Vendor   Vendor
	Adapters []int // enumeration indexes of the adapters using it
	Files    []File
}

// Adapter is an enumerated adapter with its vendor and driver store folder.
type Adapter struct {
	dxcore.Adapter
	Vendor Vendor
	// Folder is the on-disk folder name under the drivers dir; "" when it
	// could not be resolved, and then Err says why.
	Folder string
	// Registry is the folder's name as the host's registry spells it. It
	// differs from Folder only in case: the host's drivers dir is a Windows
	// share and finds either, but a driver in a container builds its path
	// from the registry's spelling (libdxg keeps the case) and looks it up
	// on a case-sensitive mount.
	Registry string
	Err      error
}

// Inventory is what the host offers a container: the lib dir, the adapters
// and their driver store folders.
type Inventory struct {
	LibDir     string
	LibFiles   []File
	DriversDir string
	Adapters   []Adapter // in enumeration order
	Folders    []Folder  // in order of first use, each once
}

// Causes a FolderError wraps besides fs.ErrNotExist.
var (
	ErrSymlink   = errors.New("is a symlink")
	ErrNotDir    = errors.New("is not a directory")
	ErrAmbiguous = errors.New("matches several folders that differ only in case")
	ErrBadPath   = errors.New("unusable driver store path")
	// ErrUnreadable: not everyone may list and enter the folder. A
	// container's user is an ordinary host user under a rootless engine,
	// a user namespace or --user, and would find the driver unloadable.
	ErrUnreadable = errors.New("is not readable by everyone")
)

// FolderError says why an adapter has no usable driver store folder. Its
// message is one line naming the adapter, the folder and what to do.
type FolderError struct {
	Index       int
	LUID        dxcore.LUID
	Description string
	Folder      string // the folder the host named, "" if its path maps to none
	DriversDir  string
	Err         error // fs.ErrNotExist, ErrSymlink, ErrNotDir, ErrAmbiguous, ErrBadPath or an I/O error
}

func (e *FolderError) Error() string {
	who := fmt.Sprintf("adapter %d (LUID %s)", e.Index, e.LUID)
	if e.Description != "" {
		who = fmt.Sprintf("adapter %d (%s, LUID %s)", e.Index, e.Description, e.LUID)
	}
	switch {
	case errors.Is(e.Err, ErrBadPath):
		return fmt.Sprintf("%s: %v: update or reinstall the adapter's Windows driver", who, e.Err)
	case errors.As(e.Err, new(noDriversDir)):
		return fmt.Sprintf("%s: driver store folder %q was not found: the drivers dir %s does not exist: WSL mounts it for GPU drivers: run wsl --shutdown, or set drivers_dir in the config", who, e.Folder, e.DriversDir)
	case errors.Is(e.Err, fs.ErrNotExist):
		return fmt.Sprintf("%s: driver store folder %q was not found under %s: the Windows driver was probably updated while WSL was running: run wsl --shutdown", who, e.Folder, e.DriversDir)
	case errors.Is(e.Err, ErrSymlink), errors.Is(e.Err, ErrNotDir):
		return fmt.Sprintf("%s: driver store folder %q under %s %v: refusing it: make sure %s is WSL's own mount of the driver store", who, e.Folder, e.DriversDir, e.Err, e.DriversDir)
	case errors.Is(e.Err, ErrUnreadable):
		return fmt.Sprintf("%s: driver store folder %q under %s %v, so a container whose user is not host root could not load the driver from it: make it readable by everyone (r-x), as WSL mounts it", who, e.Folder, e.DriversDir, e.Err)
	case errors.Is(e.Err, ErrAmbiguous):
		return fmt.Sprintf("%s: driver store folder %q under %s %v: remove the stale one or run wsl --shutdown", who, e.Folder, e.DriversDir, e.Err)
	}
	return fmt.Sprintf("%s: driver store folder %q under %s: %v", who, e.Folder, e.DriversDir, e.Err)
}

func (e *FolderError) Unwrap() error { return e.Err }

// badPath marks a FolderName error as ErrBadPath and keeps its message.
type badPath struct{ err error }

func (b badPath) Error() string   { return b.err.Error() }
func (b badPath) Unwrap() []error { return []error{ErrBadPath, b.err} }

// noDriversDir is fs.ErrNotExist for the drivers dir itself.
type noDriversDir struct{}

func (noDriversDir) Error() string { return "the drivers dir does not exist" }
func (noDriversDir) Unwrap() error { return fs.ErrNotExist }

// Build maps each adapter to its driver store folder and vendor. It fails
// only when the lib dir is unusable; an adapter whose folder is missing or
// refused keeps a *FolderError in Err and the others are unaffected.
//
// Without ListFiles it costs a stat of the lib dir, an lstat per distinct
// folder and one per distinct folder of adapters with an unknown PCI vendor
// (AdapterVendors); the drivers dir is listed only when a folder is not
// found under its exact name.
func Build(adapters []dxcore.Adapter, opt Options) (*Inventory, error) {
	inv := &Inventory{LibDir: opt.LibDir, DriversDir: opt.DriversDir}
	if inv.LibDir == "" {
		inv.LibDir = DefaultLibDir
	}
	if inv.DriversDir == "" {
		inv.DriversDir = DefaultDriversDir
	}
	if err := checkLibDir(inv.LibDir); err != nil {
		return nil, err
	}

	c := newClassifier(inv.DriversDir)
	r := c.r
	byName := map[string]int{} // on-disk name -> index in inv.Folders
	for _, a := range adapters {
		ad := Adapter{Adapter: a, Vendor: c.vendor(a)}
		fe := &FolderError{Index: a.Index, LUID: a.LUID, Description: a.Description, DriversDir: inv.DriversDir}
		name, err := FolderName(a.DriverStorePath)
		if err != nil {
			fe.Err = badPath{err}
			ad.Err = fe
			inv.Adapters = append(inv.Adapters, ad)
			continue
		}
		fe.Folder = name
		res := r.resolve(name)
		if res.err != nil {
			fe.Err = res.err
			ad.Err = fe
			inv.Adapters = append(inv.Adapters, ad)
			continue
		}
		ad.Folder, ad.Registry = res.name, name
		hostPath := filepath.Join(inv.DriversDir, res.name)
		i, ok := byName[res.name]
		if !ok {
			i = len(inv.Folders)
			byName[res.name] = i
			inv.Folders = append(inv.Folders, Folder{Name: res.name, HostPath: hostPath, Vendor: ad.Vendor})
		}
		f := &inv.Folders[i]
		f.Adapters = append(f.Adapters, a.Index)
		if f.Vendor == Unknown {
			f.Vendor = ad.Vendor
		}
		inv.Adapters = append(inv.Adapters, ad)
	}

	if opt.ListFiles {
		var err error
		if inv.LibFiles, err = ListFiles(inv.LibDir); err != nil {
			return nil, err
		}
		for i := range inv.Folders {
			if inv.Folders[i].Files, err = ListFiles(inv.Folders[i].HostPath); err != nil {
				return nil, err
			}
		}
	}
	return inv, nil
}

func checkLibDir(dir string) error {
	fi, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s does not exist: WSL mounts its GPU libraries there: run this inside WSL2 with a current Windows GPU driver, or set lib_dir in the config", dir)
	}
	if err != nil {
		return fmt.Errorf("stat lib dir: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory: point lib_dir in the config at WSL's GPU library mount", dir)
	}
	if !everyoneReads(fi) {
		return fmt.Errorf("%s is not readable by everyone (mode %04o), so a container whose user is not host root could not load the GPU libraries from it: make it readable by everyone (r-x), as WSL mounts it", dir, fi.Mode().Perm())
	}
	return nil
}

// everyoneReads reports whether others may list and enter directory fi.
// The mode bits decide, not access(2) as the hook: root passes that, yet
// the container's user may be anyone on the host (rootless engines, user
// namespaces, --user), and WSL mounts its files r-x for all.
func everyoneReads(fi fs.FileInfo) bool {
	return fi.Mode().Perm()&0o005 == 0o005
}

// resolver finds folders under the drivers dir, remembering answers so
// adapters sharing a folder cost one lookup and the drivers dir is listed
// at most once.
type resolver struct {
	driversDir string
	found      map[string]resolved      // by FolderName result
	listings   map[string][]fs.DirEntry // by directory, for the case-insensitive fallback
}

type resolved struct {
	name string // on disk
	err  error
}

func (r *resolver) resolve(name string) resolved {
	if res, ok := r.found[name]; ok {
		return res
	}
	res := r.walk(name)
	r.found[name] = res
	return res
}

// walk resolves name one component at a time with lstat, so no symlink is
// followed out of the drivers dir. A component missing under its exact name
// is looked up ignoring case: Windows paths are case-insensitive, and the
// host may say KIPUDRV.INF_AMD64_... for the folder kipudrv.inf_amd64_....
func (r *resolver) walk(name string) resolved {
	dir := r.driversDir
	var onDisk []string
	var fi fs.FileInfo
	for _, c := range strings.Split(name, "/") {
		var err error
		fi, err = os.Lstat(filepath.Join(dir, c))
		if errors.Is(err, fs.ErrNotExist) {
			var alt string
			if alt, err = r.matchFold(dir, c); err == nil {
				c = alt
				fi, err = os.Lstat(filepath.Join(dir, c))
			}
		}
		if err != nil {
			return resolved{err: err}
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			return resolved{err: ErrSymlink}
		case !fi.IsDir():
			return resolved{err: ErrNotDir}
		}
		dir = filepath.Join(dir, c)
		onDisk = append(onDisk, c)
	}
	// Only the folder itself is bound, so only its own mode matters.
	if !everyoneReads(fi) {
		return resolved{err: fmt.Errorf("%w (mode %04o)", ErrUnreadable, fi.Mode().Perm())}
	}
	return resolved{name: strings.Join(onDisk, "/")}
}

// matchFold returns the one entry of dir equal to name ignoring case.
func (r *resolver) matchFold(dir, name string) (string, error) {
	ents, ok := r.listings[dir]
	if !ok {
		var err error
		ents, err = os.ReadDir(dir)
		if errors.Is(err, fs.ErrNotExist) && dir == r.driversDir {
			return "", noDriversDir{}
		}
		if err != nil {
			return "", fmt.Errorf("list %s: %w", dir, err)
		}
		if r.listings == nil {
			r.listings = map[string][]fs.DirEntry{}
		}
		r.listings[dir] = ents
	}
	var matches []string
	for _, e := range ents {
		if strings.EqualFold(e.Name(), name) {
			matches = append(matches, e.Name())
		}
	}
	switch len(matches) {
	case 0:
		return "", fs.ErrNotExist
	case 1:
		return matches[0], nil
	}
	return "", fmt.Errorf("%w (%s)", ErrAmbiguous, strings.Join(matches, ", "))
}
