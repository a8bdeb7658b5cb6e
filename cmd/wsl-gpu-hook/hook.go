package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/moby/sys/userns"
	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/config"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/devcgroup"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/driverstore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/dxcore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/mounts"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/nsenter"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/oci"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/request"
)

// OCI hook stages the hook serves.
const (
	// stagePrestart and stageCreateRuntime run in the runtime's namespaces:
	// the hook enters the container's mount namespace itself.
	stagePrestart      = "prestart"
	stageCreateRuntime = "createRuntime"
	// stageCreateContainer runs already inside the container's mount
	// namespace; device rules are then the runtime's job (CDI, wrapper).
	stageCreateContainer = "createContainer"
)

// hookInput is everything the hook reads before it decides.
type hookInput struct {
	bundle string
	pid    int
	rootfs string
	spec   *oci.Spec
	req    request.Request
	// rootless: the hook itself runs in a user namespace, a rootless
	// engine's, as an ordinary user on the host.
	rootless bool
	// selectAdapters, when set, replaces req's selection: the CDI hook's
	// devices select by their own rules (cdispec.Selection).
	selectAdapters func([]driverstore.Adapter) ([]driverstore.Adapter, error)
}

func runHook(_ context.Context, stage string, cfg config.Config, stdin io.Reader) error {
	logger, closeLog := newLogger(cfg)
	defer closeLog()
	log := logger.WithField("stage", stage)
	if err := hook(stage, cfg, stdin, log); err != nil {
		log.Errorf("%v", err)
		return fmt.Errorf("%s: %w", stage, err)
	}
	return nil
}

func hook(stage string, cfg config.Config, stdin io.Reader, log *logrus.Entry) error {
	in, err := readInput(cfg, stdin)
	if err != nil {
		return err
	}
	entry := log.WithFields(logrus.Fields{"bundle": in.bundle, "pid": in.pid})
	if in.req.None() {
		entry.Debugf("no GPU requested (%s): nothing to do", orUnset(in.req.Source))
		return nil
	}
	// When the runtime put /dev/dxg in the spec (CDI, the wrapper) the node
	// is there already, usable in any user namespace.
	runtimeNode := in.spec.HasDevice(mounts.ContainerDevice)
	// A hook in a user namespace of its own is a rootless engine's: it may
	// not touch device cgroups, and needs not, because a rootless runtime
	// cannot set device rules either.
	in.rootless = userns.RunningInUserNS()
	if in.rootless {
		entry.Infof("the hook runs in a user namespace (rootless engine): device cgroups are left alone, /dev/dxg is bound from the host")
	}
	if stage == stageCreateContainer && !in.rootless {
		if err := allowSelf(cfg, in.spec); err != nil {
			return err
		}
	}
	plan, dev, err := planFor(cfg, in, entry)
	if err != nil {
		return err
	}
	if in.spec.UserNamespace() && runtimeNode {
		plan = withoutDevice(plan)
	}
	steps := make([]string, len(plan))
	for i, s := range plan {
		steps[i] = s.String()
	}
	entry.Infof("plan: %s", strings.Join(steps, "; "))

	if stage != stageCreateContainer {
		if in.pid <= 0 {
			return fmt.Errorf("container state has no pid: run the hook as a prestart or createRuntime hook")
		}
		if !in.rootless {
			if err := devcgroup.Allow(in.pid, in.spec.DeviceRules(), dev); err != nil {
				return err
			}
		}
		return nsenter.InMountNS(in.pid, func() error { return applyPlan(in.rootfs, plan, entry) })
	}
	return applyPlan(in.rootfs, plan, entry)
}

// withoutDevice drops the device step: the runtime made the node.
func withoutDevice(plan []mounts.Step) []mounts.Step {
	var out []mounts.Step
	for _, s := range plan {
		if s.Kind != mounts.Device {
			out = append(out, s)
		}
	}
	return out
}

// allowSelf grants the device to the cgroup this hook runs in: a
// createContainer hook runs inside the container's cgroup (runc starts it
// from the container's init), so it cannot even open /dev/dxg to enumerate
// until the container's device rules allow it.
func allowSelf(cfg config.Config, spec *oci.Spec) error {
	hostDev, err := statDevice(cfg.DxgDevice)
	if err != nil {
		return err
	}
	dev := devcgroup.Device{Type: 'c', Major: int64(hostDev.Major), Minor: int64(hostDev.Minor)}
	// The hook is in the container's pid namespace but sees the host's
	// /proc: its own pid there is what /proc/self names.
	self, err := os.Readlink("/proc/self")
	if err != nil {
		return fmt.Errorf("find own pid in /proc: %w", err)
	}
	pid, err := strconv.Atoi(self)
	if err != nil {
		return fmt.Errorf("find own pid in /proc: %q", self)
	}
	if err := devcgroup.Allow(pid, spec.DeviceRules(), dev); err != nil {
		return fmt.Errorf("%w: a createContainer hook runs in the container's device cgroup: put /dev/dxg in the container (wsl-gpu-runtime or CDI) or use the prestart stage", err)
	}
	return nil
}

func applyPlan(rootfs string, plan []mounts.Step, log *logrus.Entry) error {
	err := mounts.Apply(rootfs, plan, log)
	var ro *mounts.Error
	switch {
	case err == nil:
		log.Infof("GPU ready in %s", rootfs)
		return nil
	case errors.As(err, &ro) && errors.Is(err, unix.EROFS):
		return fmt.Errorf("%w: the container's root filesystem is read-only before the hook ran: let the runtime make it read-only (config.json root.readonly), not the storage", err)
	case errors.Is(err, unix.ENOSPC), errors.Is(err, unix.EDQUOT):
		return fmt.Errorf("%w: the container's root filesystem is full: free space in the image's storage", err)
	case errors.As(err, &ro) && ro.Op == "mkdir parent":
		return fmt.Errorf("%w: the image has a file or a link that does not resolve inside it on this path: fix the image", err)
	case errors.As(err, &ro) && strings.HasPrefix(ro.Op, "open_tree ") && errors.Is(err, unix.ENOENT):
		return fmt.Errorf("%w: the host's WSL files changed while the hook ran (a Windows driver update?): run wsl --shutdown and start the container again", err)
	case errors.As(err, &ro) && errors.Is(err, unix.ENOENT):
		// The hook holds a handle on the parent directory; only its removal
		// meanwhile makes a create in it fail so.
		return fmt.Errorf("%w: a directory of the image on this path was removed while the hook worked in it: something is changing the container's root filesystem during its start: stop that and start the container again", err)
	}
	return err
}

func readInput(cfg config.Config, stdin io.Reader) (*hookInput, error) {
	st, err := oci.ReadState(stdin)
	if err != nil {
		return nil, err
	}
	spec, err := oci.LoadSpec(st.Bundle)
	if err != nil {
		return nil, err
	}
	rootfs, err := spec.RootPath(st.Bundle)
	if err != nil {
		return nil, err
	}
	req, err := request.FromSpec(spec, cfg.RequestEnv, cfg.RequestAnnotation)
	if err != nil {
		return nil, fmt.Errorf("%w: fix the container's GPU request", err)
	}
	return &hookInput{bundle: st.Bundle, pid: st.Pid, rootfs: rootfs, spec: spec, req: req}, nil
}

// planFor enumerates the host, applies the request and computes the plan.
func planFor(cfg config.Config, in *hookInput, log *logrus.Entry) ([]mounts.Step, devcgroup.Device, error) {
	var dev devcgroup.Device
	hostDev, err := statDevice(cfg.DxgDevice)
	if err != nil {
		return nil, dev, err
	}

	dev = devcgroup.Device{Type: 'c', Major: int64(hostDev.Major), Minor: int64(hostDev.Minor)}

	enum, err := dxcore.Enumerate(cfg.DxgDevice)
	if err != nil {
		return nil, dev, err
	}
	for _, s := range enum.Skipped {
		log.Warnf("skipped %v", s)
	}
	inv, err := driverstore.Build(enum.Adapters, driverstore.Options{LibDir: cfg.LibDir, DriversDir: cfg.DriversDir})
	if err != nil {
		return nil, dev, err
	}
	var selected []driverstore.Adapter
	if in.selectAdapters != nil {
		selected, err = in.selectAdapters(inv.Adapters)
	} else {
		selected, err = request.Select(in.req, inv.Adapters, targets(inv.Adapters))
	}
	if err != nil {
		return nil, dev, err
	}
	log.Infof("request %s selects %d of %d adapters", in.req.Source, len(selected), len(inv.Adapters))

	var folders []string
	var firstErr error
	seen := map[string]bool{}
	nvidia := false
	for _, a := range selected {
		if a.Err != nil {
			// The device and lib dir still serve the others; a request
			// for this adapter alone gets no driver files, so say why.
			if !in.req.All && len(selected) == 1 {
				return nil, dev, a.Err
			}
			log.Warnf("%v", a.Err)
			if firstErr == nil {
				firstErr = a.Err
			}
			continue
		}
		if !seen[a.Folder] {
			seen[a.Folder] = true
			folders = append(folders, a.Folder)
		}
		nvidia = nvidia || a.Vendor == driverstore.NVIDIA
	}
	// Without a single driver folder no vendor's stack can load: a
	// container started so would only look as if it had a GPU.
	if len(folders) == 0 && firstErr != nil {
		return nil, dev, firstErr
	}

	pin := mounts.Inputs{
		Device: hostDev,
		// A node made on a /dev the container's user namespace mounted
		// could not be opened there, and a rootless hook may not make one:
		// bind the host's instead.
		BindDevice: in.spec.UserNamespace() || in.rootless,
		LibDir:     cfg.LibDir,
		DriversDir: cfg.DriversDir,
		Folders:    folders,
	}
	if nvidia {
		pin.NvidiaSmi = nvidiaSmi(cfg, folders)
	}
	if pin.Ldcache, err = ldcacheEntries(cfg); err != nil {
		return nil, dev, err
	}
	return mounts.Plan(pin), dev, nil
}

// targets returns the selector view of each adapter, numbering the NVIDIA
// adapters among themselves as NVIDIA_VISIBLE_DEVICES counts them.
func targets(adapters []driverstore.Adapter) func(driverstore.Adapter) request.Target {
	nvidia := map[int]int{}
	for _, a := range adapters {
		if a.Vendor == driverstore.NVIDIA {
			nvidia[a.Index] = len(nvidia)
		}
	}
	return func(a driverstore.Adapter) request.Target {
		n, ok := nvidia[a.Index]
		if !ok {
			n = -1
		}
		return request.Target{Index: a.Index, LUID: a.LUID, Vendor: string(a.Vendor), NVIDIAIndex: n}
	}
}

// nvidiaSmi finds the nvidia-smi a container should get, as a container path:
// WSL puts it in the lib dir; older drivers only in the driver store.
func nvidiaSmi(cfg config.Config, folders []string) string {
	if isExecutable(filepath.Join(cfg.LibDir, "nvidia-smi")) {
		return path.Join(mounts.ContainerLibDir, "nvidia-smi")
	}
	for _, f := range folders {
		if isExecutable(filepath.Join(cfg.DriversDir, f, "nvidia-smi")) {
			return path.Join(mounts.ContainerDriversDir, f, "nvidia-smi")
		}
	}
	return ""
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// statDevice checks the host's GPU device before anything else happens.
func statDevice(p string) (mounts.HostDevice, error) {
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return mounts.HostDevice{}, fmt.Errorf("%s does not exist: not a WSL2 VM with GPU paravirtualization: run this inside WSL2 with a current Windows GPU driver, or set dxg_device in the config", p)
		}
		return mounts.HostDevice{}, fmt.Errorf("stat %s: %w", p, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFCHR {
		return mounts.HostDevice{}, fmt.Errorf("%s is not a character device: point dxg_device in the config at WSL's GPU device", p)
	}
	return mounts.HostDevice{Path: p, Major: unix.Major(st.Rdev), Minor: unix.Minor(st.Rdev)}, nil
}

func orUnset(s string) string {
	if s == "" {
		return "no request variable set"
	}
	return s
}

// newLogger opens the configured log file. A log that cannot be opened must
// not cost the user their GPU, so it falls back to discarding.
func newLogger(cfg config.Config) (*logrus.Logger, func()) {
	log := logrus.New()
	log.SetOutput(io.Discard)
	log.SetFormatter(&logrus.TextFormatter{DisableColors: true, FullTimestamp: true})
	if lvl, err := logrus.ParseLevel(strings.ToLower(cfg.LogLevel)); err == nil {
		log.SetLevel(lvl)
	}
	if cfg.LogFile == "" {
		return log, func() {}
	}
	// O_APPEND makes each entry (one write) land whole even when many hooks
	// log at once.
	f, err := os.OpenFile(cfg.LogFile, os.O_WRONLY|os.O_APPEND|os.O_CREATE|unix.O_CLOEXEC, 0o640)
	if err != nil {
		return log, func() {}
	}
	log.SetOutput(f)
	return log, func() { f.Close() }
}
