package hookrun

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"

	"github.com/moby/sys/userns"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/config"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/devnode"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/gpuhost"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/probecache"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/capability"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/devcgroup"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/gpuplan"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/hooklog"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/mounts"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/nsenter"
)

// Run carries the job out: probe, decide, log the plan, cgroup, apply.
// The decisions are gpuplan's.
func (j *Job) Run(cfg config.Config, log *hooklog.Logger) error {
	log = log.With("bundle", j.Bundle).With("pid", strconv.Itoa(j.Container.Pid))
	if j.Done != "" {
		if j.Quiet {
			log.Debugf("%s", j.Done)
		} else {
			log.Infof("%s", j.Done)
		}
		return nil
	}
	c := j.Container
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
		if err := allowSelf(j.Spec, node); err != nil {
			return err
		}
	}
	opts := HostOptions(cfg)
	opts.Details = j.Details
	opts.Cached = func(hit bool, miss error) {
		switch {
		case hit:
			log.Debugf("host probe answered from the cache in %s", cfg.ProbeCache)
		case errors.Is(miss, probecache.ErrUntrusted):
			// Someone but root wrote it, or could have.
			log.Warnf("host probe cache not used: %v", miss)
		case miss != nil && !errors.Is(miss, fs.ErrNotExist):
			log.Infof("host probe cache not used: %v", miss)
		}
	}
	opts.Note = func(err error) { log.Infof("%v", err) }
	host, skipped, err := gpuhost.Probe(node, opts)
	for _, s := range skipped {
		log.Warnf("skipped %v", s)
	}
	if err != nil {
		return err
	}
	if j.Resolve != nil {
		if c.Request, err = j.Resolve(host.Inventory.Adapters); err != nil {
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
	if j.Caps.Source != "" {
		log.Infof("capabilities %s from %s", j.Caps.Set|capability.Default, j.Caps.Source)
	}
	for _, w := range plan.Warnings {
		log.Warnf("%v", w)
	}
	logStack(log, j.Spec, plan.Stack)
	log.Infof("plan: %s", plan)

	switch plan.Cgroup {
	case gpuplan.CgroupInit:
		if err := devcgroup.Allow(plan.Pid, j.Spec.DeviceRules(), append([]devnode.Node{plan.Node}, plan.Nodes...)...); err != nil {
			return err
		}
	case gpuplan.CgroupSelf:
		// allowSelf let /dev/dxg in before the enumeration; the others
		// join it now.
		if err := allowSelfNodes(j.Spec, plan.Node, plan.Nodes); err != nil {
			return err
		}
	}
	if plan.EnterMountNS {
		return nsenter.InMountNS(plan.Pid, func() error { return j.apply(plan.Steps, log) })
	}
	return j.apply(plan.Steps, log)
}

// HostOptions is how a hook probes the host: one short-lived process with
// one /dev/dxg fd.
func HostOptions(cfg config.Config) gpuhost.Options {
	return gpuhost.Options{LibDir: cfg.LibDir, DriversDir: cfg.DriversDir, Ldcache: cfg.Ldcache == config.LdcacheBuiltin, ShortLived: true, CacheDir: cfg.ProbeCache, SonameCache: cfg.SonameCache, Sysfs: cfg.SysfsDir}
}

// apply carries the steps out in the root filesystem the entry holds
// open, or else in the one at Rootfs, opened in the namespace apply runs in.
func (j *Job) apply(steps []mounts.Step, log *hooklog.Logger) error {
	var err error
	if j.Root != nil {
		err = mounts.ApplyAt(j.Root.FD, steps, log)
	} else {
		err = mounts.Apply(j.Rootfs, steps, log)
	}
	if err != nil {
		return mounts.Advise(err)
	}
	log.Infof("GPU ready in %s", j.Rootfs)
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
