package doctor

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/driverstore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/dxcore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/dxgsysfs"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/stackprobe"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/vendorstack"
)

// Fixes that are Windows-side commands.
const (
	fixShutdown     = "in Windows: wsl --shutdown"
	fixUpdateWSL    = "in Windows: wsl --update, then wsl --shutdown"
	fixUpdateDriver = "in Windows: install or update the GPU driver, then wsl --shutdown"
)

// gpuFacts is what later checks need to know about the host.
type gpuFacts struct {
	known   bool     // the adapters were enumerated
	nvidia  bool     // an NVIDIA adapter was enumerated
	folders []string // host paths of the usable driver store folders
}

func checkGPU(o Options, r *Report) gpuFacts {
	var facts gpuFacts
	if !checkDevice(o, r) {
		r.add("kernel", Warn, "", "not checked: %s cannot be opened", o.DxgDevice)
		r.add("adapters", Warn, "", "not checked: %s cannot be opened", o.DxgDevice)
		checkLibDir(o, r, facts)
		return facts
	}
	enum, err := o.Enumerate(o.DxgDevice)
	switch {
	case errors.Is(err, dxcore.ErrUnsupported):
		r.add("kernel", Fail, fixUpdateWSL, "the kernel knows neither ENUMADAPTERS3 nor ENUMADAPTERS2: %v", err)
	case enum == nil && err != nil && !errors.Is(err, dxcore.ErrNoAdapters):
		r.add("kernel", Fail, "", "adapter enumeration failed: %v", err)
	case enum != nil && enum.Ioctl == "ENUMADAPTERS2":
		r.add("kernel", Warn, fixUpdateWSL, "the kernel lacks LX_DXENUMADAPTERS3 and answered LX_DXENUMADAPTERS2, which never lists compute-only adapters (NPUs, GPUs in MCDM mode)")
	case enum != nil:
		r.add("kernel", OK, "", "the kernel answers LX_DXENUMADAPTERS3 (compute-only adapters included)")
	default:
		r.add("kernel", OK, "", "the kernel knows the enumerate call")
	}
	if enum == nil {
		if errors.Is(err, dxcore.ErrNoAdapters) {
			r.add("adapters", Fail, fixUpdateDriver, "%v", err)
		}
		checkLibDir(o, r, facts)
		return facts
	}
	for _, s := range enum.Skipped {
		r.add(fmt.Sprintf("adapter %d", s.Index), Fail, fixUpdateDriver, "LUID %s did not answer its queries, so no container gets it: %v", s.LUID, s.Err)
	}
	if len(enum.Adapters) == 0 {
		r.add("adapters", Fail, fixUpdateDriver, "%v", err)
		checkLibDir(o, r, facts)
		return facts
	}
	// The lib dir has a check of its own below; Build refuses to map
	// folders behind a bad lib dir, so it is given one that always passes
	// ("/" is a directory everyone reads) to report the folders anyway.
	inv, berr := driverstore.Build(enum.Adapters, driverstore.Options{LibDir: "/", DriversDir: o.DriversDir})
	if berr != nil {
		r.add("adapters", Fail, "", "map driver store folders: %v", berr)
		checkLibDir(o, r, facts)
		return facts
	}
	facts.known = true
	for _, a := range inv.Adapters {
		if a.Vendor == driverstore.NVIDIA {
			facts.nvidia = true
		}
		checkAdapter(o, r, a, &facts)
	}
	checkWarmStart(o, r, enum.Adapters)
	checkLibDir(o, r, facts)
	checkFirstStart(o, r)
	checkROCm(o, r, inv.Adapters)
	return facts
}

// checkWarmStart says whether a start with a warm probe cache can leave
// /dev/dxg closed: only when sysfs names every adapter just listed (package
// dxgsysfs, package probecache). Either way containers get their GPUs; it
// is what a start costs, so it is never a failure.
func checkWarmStart(o Options, r *Report, adapters []dxcore.Adapter) {
	const check = "warm start"
	if o.NoSysfs {
		r.add(check, OK, "", "sysfs_dir is \"\" in the configuration: every container start opens %s to list the adapters", o.DxgDevice)
		return
	}
	dir := filepath.Join(o.Sysfs, dxgsysfs.Dirs[0])
	reading, err := dxgsysfs.Read(o.Sysfs)
	if err != nil {
		r.add(check, Warn, "", "cannot list the GPU driver's devices in sysfs (%v): every container start opens %s to list the adapters, two more round trips to Windows; on a WSL kernel with dxgkrnl built in, check that sysfs_dir names sysfs", err, o.DxgDevice)
		return
	}
	luids := make([]uint64, len(adapters))
	for i, a := range adapters {
		luids[i] = a.LUID.Uint64()
	}
	if !reading.Covers(luids) {
		var missing []string
		for _, a := range adapters {
			if !reading.Covers([]uint64{a.LUID.Uint64()}) {
				missing = append(missing, a.LUID.String())
			}
		}
		r.add(check, Warn, "", "%s names no VM-bus channel for adapter LUID %s: the probe cache cannot trust it, and every container start opens %s to list the adapters", dir, strings.Join(missing, ", "), o.DxgDevice)
		return
	}
	r.add(check, OK, "", "%s names all %d adapters: a container start with a warm probe cache does not open %s", dir, len(adapters), o.DxgDevice)
}

// checkROCm: ROCm on WSL runs on librocdxg from the host's ROCm install,
// which neither WSL nor ROCm images provide; without it an AMD container
// gets the driver folder and still cannot run ROCm.
func checkROCm(o Options, r *Report, adapters []driverstore.Adapter) {
	if o.ROCmDir == "" {
		return
	}
	rocm := stackprobe.ROCm(o.ROCmDir)
	for _, line := range vendorstack.Missing(vendorstack.FromInventory(adapters), rocm) {
		r.add("rocm", Warn, "install ROCm 7.1+ with librocdxg in this WSL distro (AMD's ROCm on WSL guide), then: sudo wsl-gpu-hook cdi generate", "%s", line)
		return
	}
	for _, a := range adapters {
		if a.Vendor == driverstore.AMD {
			r.add("rocm", OK, "", "librocdxg at %s: AMD containers get it", rocm.Lib)
			return
		}
	}
}

// checkDevice reports the device and whether enumeration can be tried.
func checkDevice(o Options, r *Report) bool {
	dev := o.DxgDevice
	fi, err := os.Stat(dev)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		r.add("dxg", Fail, fixUpdateWSL, "%s does not exist: this is not a WSL2 VM with GPU paravirtualization (WSL1, an old Windows build, or dxg_device in the config points elsewhere)", dev)
		return false
	case err != nil:
		r.add("dxg", Fail, "", "stat %s: %v", dev, err)
		return false
	case fi.Mode()&fs.ModeCharDevice == 0:
		r.add("dxg", Fail, "", "%s is not a character device (%s): point dxg_device in the config at WSL's GPU device", dev, fi.Mode().Type())
		return false
	}
	perm := fi.Mode().Perm()
	var major, minor uint32
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		major, minor = unix.Major(st.Rdev), unix.Minor(st.Rdev)
	}
	who := "root"
	if *o.Euid != 0 {
		who = fmt.Sprintf("uid %d", *o.Euid)
	}
	f, err := os.OpenFile(dev, os.O_RDWR, 0)
	if err != nil {
		fix := ""
		if errors.Is(err, fs.ErrPermission) {
			fix = "sudo chmod 0666 " + shellArg(dev)
		}
		r.add("dxg", Fail, fix, "%s (character device %d:%d, mode %04o) does not open read-write as %s: %v", dev, major, minor, perm, who, err)
		return false
	}
	f.Close()
	if perm&0o006 != 0o006 {
		r.add("dxg", Fail, "sudo chmod 0666 "+shellArg(dev), "%s (character device %d:%d) is mode %04o: other users may not read and write it, so a container whose user is not host root (rootless engines, user namespaces, --user) cannot use the GPU; WSL makes it 0666", dev, major, minor, perm)
		return true
	}
	r.add("dxg", OK, "", "%s: character device %d:%d, mode %04o, opens read-write as %s", dev, major, minor, perm, who)
	return true
}

func checkAdapter(o Options, r *Report, a driverstore.Adapter, facts *gpuFacts) {
	name := fmt.Sprintf("adapter %d", a.Index)
	desc := a.Description
	if desc == "" {
		desc = "PCI " + a.PCI.String()
	}
	who := fmt.Sprintf("%s (%s, LUID %s, WDDM %s)", desc, a.Vendor, a.LUID, dxcore.WDDM(a.WDDMVersion))
	if a.Err != nil {
		var fe *driverstore.FolderError
		fix := ""
		if errors.As(a.Err, &fe) {
			switch {
			case errors.Is(fe.Err, driverstore.ErrBadPath):
				fix = fixUpdateDriver
			case errors.Is(fe.Err, driverstore.ErrUnreadable):
				fix = "sudo chmod a+rx " + shellArg(filepath.Join(o.DriversDir, fe.Folder))
			case errors.Is(fe.Err, driverstore.ErrSymlink), errors.Is(fe.Err, driverstore.ErrNotDir):
				fix = ""
			case errors.Is(fe.Err, fs.ErrNotExist), errors.Is(fe.Err, driverstore.ErrAmbiguous):
				fix = fixShutdown
			}
		}
		// A FolderError starts by naming the adapter, as who does.
		msg := a.Err.Error()
		if _, rest, ok := strings.Cut(msg, "): "); ok && strings.HasPrefix(msg, name+" (") {
			msg = rest
		}
		r.add(name, Fail, fix, "%s: %s", who, msg)
		return
	}
	path := filepath.Join(o.DriversDir, a.Folder)
	facts.folders = append(facts.folders, path)
	registry, _ := driverstore.FolderName(a.DriverStorePath) // Build already parsed it
	if registry != a.Folder {
		r.add(name, OK, "", "%s: folder %s (the registry spells it %s; matched ignoring case, as Windows does)", who, path, registry)
		return
	}
	r.add(name, OK, "", "%s: folder %s", who, path)
}

// libFiles are the lib dir's files every vendor's stack needs, and those
// an NVIDIA driver puts there.
var (
	libCommon = []string{"libdxcore.so", "libd3d12.so", "libd3d12core.so"}
	libNVIDIA = []string{"libcuda.so.1", "libnvidia-ml.so.1", "nvidia-smi"}
)

func checkLibDir(o Options, r *Report, facts gpuFacts) {
	dir := o.LibDir
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		r.add("lib dir", Fail, fixUpdateDriver, "%s does not exist: WSL mounts the GPU user-mode libraries there when Windows has a GPU driver (or lib_dir in the config points elsewhere)", dir)
		return
	case err != nil:
		r.add("lib dir", Fail, "", "stat %s: %v", dir, err)
		return
	case !fi.IsDir():
		r.add("lib dir", Fail, "", "%s is not a directory: point lib_dir in the config at WSL's GPU library mount", dir)
		return
	case fi.Mode().Perm()&0o005 != 0o005:
		r.add("lib dir", Fail, "sudo chmod a+rx "+shellArg(dir), "%s is mode %04o: a container whose user is not host root could not load the GPU libraries from it", dir, fi.Mode().Perm())
		return
	}
	var missing, nvMissing []string
	for _, f := range libCommon {
		if !isFile(filepath.Join(dir, f)) {
			missing = append(missing, f)
		}
	}
	if facts.nvidia {
		for _, f := range libNVIDIA {
			if !isFile(filepath.Join(dir, f)) {
				nvMissing = append(nvMissing, f)
			}
		}
	}
	switch {
	case len(missing) > 0:
		r.add("lib dir", Fail, fixUpdateDriver, "%s lacks %s: D3D12 and every vendor's compute stack load it", dir, strings.Join(missing, ", "))
	case len(nvMissing) > 0:
		r.add("lib dir", Fail, "in Windows: reinstall the NVIDIA driver, then wsl --shutdown", "%s lacks %s although an NVIDIA adapter is present: CUDA and nvidia-smi will not work in containers", dir, strings.Join(nvMissing, ", "))
	case facts.nvidia:
		r.add("lib dir", OK, "", "%s: %s, %s", dir, strings.Join(libCommon, ", "), strings.Join(libNVIDIA, ", "))
	case !facts.known:
		r.add("lib dir", OK, "", "%s: %s (adapters unknown, so NVIDIA's files were not checked)", dir, strings.Join(libCommon, ", "))
	default:
		r.add("lib dir", OK, "", "%s: %s (no NVIDIA adapter, so no libcuda or nvidia-smi expected)", dir, strings.Join(libCommon, ", "))
	}
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}
