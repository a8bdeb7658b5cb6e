package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"

	"github.com/moby/sys/userns"
	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/config"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/capability"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/cdiselect"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/devcgroup"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/devnode"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/gpuhost"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/gpuplan"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/mounts"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/nsenter"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/oci"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/request"
)

func runHook(stage gpuplan.Stage, cfg config.Config, stdin io.Reader) error {
	logger, closeLog := newLogger(cfg)
	defer closeLog()
	log := logger.WithField("stage", stage)
	if err := hook(stage, cfg, stdin, nil, log, false); err != nil {
		log.Errorf("%v", err)
		return fmt.Errorf("%s: %w", stage, err)
	}
	return nil
}

// runCDIHook is the createContainer hook of a CDI device of ours: the
// engine made the node and mounted the lib dir; the device's selection, the
// hook's argument (pkg/cdiselect), says which adapters, whose current
// driver folders this mounts, as the prestart hook would. A spec written
// before the selections were arguments runs it with none: the selections
// are then the container's environment, read from config.json.
func runCDIHook(cfg config.Config, stdin io.Reader, selections []string) error {
	logger, closeLog := newLogger(cfg)
	defer closeLog()
	log := logger.WithField("stage", "cdi-hook")
	if err := hook(gpuplan.CreateContainer, cfg, stdin, selections, log, true); err != nil {
		log.Errorf("%v", err)
		return fmt.Errorf("cdi-hook: %w", err)
	}
	return nil
}

// hook is the whole OCI hook: read the container, decide, log the plan,
// carry it out. The decisions are gpuplan's.
//
// fromCDI: this is the CDI specs' createContainer hook. The engine made the
// node and mounted the lib dir; the request is the CDI devices' selections
// (variables the specs set, see pkg/cdiselect), and the vendor stacks' edits
// came with the devices, so no capability adds anything here.
func hook(stage gpuplan.Stage, cfg config.Config, stdin io.Reader, selections []string, log *logrus.Entry, fromCDI bool) error {
	in, err := readInput(cfg, stdin, selections, fromCDI)
	if err != nil {
		return err
	}
	log = log.WithFields(logrus.Fields{"bundle": in.bundle, "pid": in.pid})
	c := gpuplan.FromSpec(in.spec, stage, in.pid, in.req)
	c.Caps = in.caps.Set
	c.Injected = fromCDI
	if fromCDI && len(in.cdi.Selections) == 0 {
		log.Infof("no CDI device of ours selects an adapter: nothing to do")
		return nil
	}
	if why := c.Skip(); why != "" && !fromCDI {
		if c.Request.None() {
			log.Debugf("%s", why)
		} else {
			log.Infof("%s", why)
		}
		return nil
	}
	if c.EntersMountNS() {
		// The thread a namespace entry needs starts while the host is
		// enumerated.
		nsenter.Prepare()
	}
	c.Rootless = userns.RunningInUserNS()
	if c.Rootless {
		log.Infof("the hook runs in a user namespace (a rootless engine's or the container's own): device cgroups are left alone, /dev/dxg is bound from the host")
	}
	node, err := devnode.Stat(cfg.DxgDevice)
	if err != nil {
		return err
	}
	if c.Cgroup() == gpuplan.CgroupSelf {
		if err := allowSelf(in.spec, node); err != nil {
			return err
		}
	}
	opts := hostOptions(cfg)
	// Selection variables (ZE_AFFINITY_MASK, Mesa's adapter name) need the
	// adapters' types and descriptions; a request for all sets none.
	opts.Details = !in.req.All && !fromCDI
	opts.Cached = func(hit bool, miss error) {
		switch {
		case hit:
			log.Debugf("host probe answered from the cache in %s", cfg.ProbeCache)
		case miss != nil && !errors.Is(miss, fs.ErrNotExist):
			log.Infof("host probe cache not used: %v", miss)
		}
	}
	host, skipped, err := gpuhost.Probe(node, opts)
	for _, s := range skipped {
		log.Warnf("skipped %v", s)
	}
	if err != nil {
		return err
	}
	if fromCDI {
		// Selections name adapters by vendor and index among the vendor's,
		// which only the inventory resolves.
		if c.Request, err = in.cdi.ToSelection(host.Inventory.Adapters); err != nil {
			return err
		}
	}
	if host.Stack, err = probeStack(cfg, host, c.Caps); err != nil {
		return err
	}
	plan, err := gpuplan.Decide(c, host)
	if err != nil {
		return err
	}
	log.Infof("request %s selects %d of %d adapters", c.Request.Source, len(plan.Selected), len(host.Inventory.Adapters))
	if in.caps.Source != "" {
		log.Infof("capabilities %s from %s", in.caps.Set|capability.Default, in.caps.Source)
	}
	for _, w := range plan.Warnings {
		log.Warnf("%v", w)
	}
	logStack(log, in.spec, plan.Stack)
	log.Infof("plan: %s", plan)

	switch plan.Cgroup {
	case gpuplan.CgroupInit:
		if err := devcgroup.Allow(plan.Pid, in.spec.DeviceRules(), append([]devnode.Node{plan.Node}, plan.Nodes...)...); err != nil {
			return err
		}
	case gpuplan.CgroupSelf:
		// allowSelf let /dev/dxg in before the enumeration; the others
		// join it now.
		if err := allowSelfNodes(in.spec, plan.Node, plan.Nodes); err != nil {
			return err
		}
	}
	if plan.EnterMountNS {
		return nsenter.InMountNS(plan.Pid, func() error { return applyPlan(in.rootfs, plan.Steps, log) })
	}
	return applyPlan(in.rootfs, plan.Steps, log)
}

// input is what the hook reads before it decides.
type input struct {
	bundle string
	pid    int
	rootfs string
	spec   *oci.Spec
	req    request.Selection
	caps   capability.Choice
	cdi    cdiselect.Union // the CDI devices' selections, for the CDI hook
}

func readInput(cfg config.Config, stdin io.Reader, selections []string, fromCDI bool) (*input, error) {
	st, err := oci.ReadState(stdin)
	if err != nil {
		return nil, err
	}
	if fromCDI && len(selections) > 0 {
		return readCDIInput(st, selections)
	}
	spec, err := oci.LoadSpec(st.Bundle)
	if errors.Is(err, fs.ErrPermission) && fromCDI {
		return nil, fmt.Errorf("%w: this CDI spec predates wsl-gpu-hook's support for containers with a user namespace of their own: regenerate it with wsl-gpu-hook cdi generate", err)
	}
	if err != nil {
		return nil, err
	}
	rootfs, err := spec.RootPath(st.Bundle)
	if err != nil {
		return nil, err
	}
	if fromCDI {
		in := &input{bundle: st.Bundle, pid: st.Pid, rootfs: rootfs, spec: spec}
		var env []string
		if spec.Process != nil {
			env = spec.Process.Env
		}
		in.cdi, err = cdiselect.FromEnv(env)
		return in, err
	}
	req, err := request.FromSpec(spec, cfg.RequestEnv, cfg.RequestAnnotation)
	if err != nil {
		return nil, fmt.Errorf("%w: fix the container's GPU request", err)
	}
	var caps capability.Choice
	if !req.None() {
		if caps, err = capability.FromSpec(spec); err != nil {
			return nil, fmt.Errorf("%w: fix the container's GPU request", err)
		}
	}
	return &input{bundle: st.Bundle, pid: st.Pid, rootfs: rootfs, spec: spec, req: req, caps: caps}, nil
}

// readCDIInput is what a CDI device's hook reads: the state and its own
// arguments, never the bundle's config.json, which the container's root
// cannot read when the container has a user namespace of its own (the hook
// then runs as that root). The CDI hook needs nothing else from the spec:
// the engine made the node, the lib dir mount and the device rule, and
// the device carried its variables.
func readCDIInput(st *oci.State, selections []string) (*input, error) {
	req, err := cdiselect.FromArgs(selections)
	if err != nil {
		return nil, err
	}
	cwd, err := unix.Getwd()
	if err != nil {
		return nil, fmt.Errorf("find the container's root filesystem: %w", err)
	}
	rootfs, err := st.HookRoot(cwd)
	if err != nil {
		return nil, err
	}
	return &input{bundle: st.Bundle, pid: st.Pid, rootfs: rootfs, spec: &oci.Spec{}, cdi: req}, nil
}

func hostOptions(cfg config.Config) gpuhost.Options {
	// A hook is one short-lived process with one /dev/dxg fd.
	return gpuhost.Options{LibDir: cfg.LibDir, DriversDir: cfg.DriversDir, Ldcache: cfg.Ldcache == config.LdcacheBuiltin, ShortLived: true, CacheDir: cfg.ProbeCache}
}

// allowSelf grants the device to the cgroup this hook runs in: a
// createContainer hook runs inside the container's cgroup (runc starts it
// from the container's init), so it cannot even open /dev/dxg to enumerate
// until the container's device rules allow it.
func allowSelf(spec *oci.Spec, node devnode.Node) error {
	pid, err := hostPid()
	if err != nil {
		return err
	}
	if err := devcgroup.Allow(pid, spec.DeviceRules(), node); err != nil {
		return fmt.Errorf("%w: a createContainer hook runs in the container's device cgroup: put /dev/dxg in the container (wsl-gpu-runtime or CDI) or use the prestart stage", err)
	}
	return nil
}

// hostPid is this process's pid in the host's /proc: a createContainer
// hook is in the container's pid namespace but sees the host's /proc, where
// /proc/self names it.
func hostPid() (int, error) {
	self, err := os.Readlink("/proc/self")
	if err != nil {
		return 0, fmt.Errorf("find own pid in /proc: %w", err)
	}
	pid, err := strconv.Atoi(self)
	if err != nil {
		return 0, fmt.Errorf("find own pid in /proc: %q", self)
	}
	return pid, nil
}

func applyPlan(rootfs string, plan []mounts.Step, log *logrus.Entry) error {
	if err := mounts.Apply(rootfs, plan, log); err != nil {
		return mounts.Advise(err)
	}
	log.Infof("GPU ready in %s", rootfs)
	return nil
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
