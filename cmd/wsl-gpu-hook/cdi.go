package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"

	pathrs "github.com/cyphar/filepath-securejoin/pathrs-lite"
	"github.com/moby/sys/userns"
	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
	cdi "tags.cncf.io/container-device-interface/specs-go"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/config"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/atomicfile"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/cdiinstall"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/cdispec"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/devnode"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/gpuhost"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/gpuplan"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/ldcache"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/mounts"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/oci"
)

// runCDI is `cdi generate`: the specs for this host, written only when
// they change. Flags: see cdiinstall.ParseGenerateArgs.
func runCDI(cfg config.Config, args []string, stdout io.Writer) error {
	if len(args) == 0 || args[0] != "generate" {
		return usageError{"cdi: want `cdi generate [--dir DIR] [--hook PATH] [--skip-kind KIND]... | [--output FILE|-] [--kind KIND]`"}
	}
	flags, err := cdiinstall.ParseGenerateArgs(args[1:])
	if err != nil {
		return usageError{"cdi generate: " + err.Error()}
	}
	self, err := selfPath()
	if err != nil {
		return err
	}
	if flags.Dir == "" && flags.Output == "" {
		flags.Dir = cdiinstall.SystemSpecDir
		if os.Geteuid() != 0 {
			flags.Dir = cdiinstall.User("", "", os.Getenv("HOME"), os.Getenv("XDG_CONFIG_HOME"), "").SpecDir
		}
	}
	o := flags.Options(self, cfg.Path())
	host, err := cdiHost(cfg)
	if err != nil {
		return fmt.Errorf("cdi generate: %w", err)
	}
	specs, err := cdispec.Generate(host.Inventory, o.SpecOptions(host.Device, host.LibDir))
	if err != nil {
		return fmt.Errorf("cdi generate: %w", err)
	}
	if flags.Output != "" {
		return writeOneSpec(specs, flags, stdout)
	}
	changed, err := cdiinstall.Sync(o, specs)
	for _, c := range changed {
		fmt.Fprintf(stdout, "cdi: wrote %s\n", c)
	}
	if err != nil {
		return fmt.Errorf("cdi generate: %w", err)
	}
	// Another producer may have written the same names since install
	// (NVIDIA's refresh service at boot): engines would refuse them.
	want := map[string]string{}
	for _, s := range specs {
		for _, d := range s.Devices {
			want[s.Kind+"="+d.Name] = filepath.Join(o.SpecDir, cdispec.FileName(s.Kind))
		}
	}
	conflicts, err := cdiinstall.Detect(o, nil, want)
	if err != nil {
		return fmt.Errorf("cdi generate: %w", err)
	}
	if len(conflicts) > 0 {
		e := &cdiinstall.ConflictError{Conflicts: conflicts}
		fmt.Fprint(stdout, e.Explain())
		return fmt.Errorf("cdi generate: %w: run wsl-gpu-hook install cdi with the choice", e)
	}
	return nil
}

// writeOneSpec is --output: one kind's spec to a file or stdout.
func writeOneSpec(specs []*cdi.Spec, flags cdiinstall.GenerateFlags, stdout io.Writer) error {
	for _, s := range specs {
		if s.Kind != flags.Kind {
			continue
		}
		data, err := cdispec.Marshal(s)
		if err != nil {
			return err
		}
		if flags.Output == "-" {
			_, err := stdout.Write(data)
			return err
		}
		if old, err := os.ReadFile(flags.Output); err == nil && bytes.Equal(old, data) {
			return nil // unchanged: engines watching the dir see no event
		}
		if err := atomicfile.Write(flags.Output, data, 0o644, atomicfile.Keep); err != nil {
			return fmt.Errorf("cdi generate: %w", err)
		}
		return nil
	}
	return fmt.Errorf("cdi generate: this host has no adapter for kind %s", flags.Kind)
}

// cdiHost reads what the specs are made from.
func cdiHost(cfg config.Config) (cdiinstall.Host, error) {
	node, err := devnode.Stat(cfg.DxgDevice)
	if err != nil {
		return cdiinstall.Host{}, err
	}
	h, _, err := gpuhost.Probe(node, gpuhost.Options{LibDir: cfg.LibDir, DriversDir: cfg.DriversDir})
	if err != nil {
		return cdiinstall.Host{}, err
	}
	return cdiinstall.Host{Inventory: h.Inventory, Device: node, LibDir: cfg.LibDir}, nil
}

// selfPath is the running binary, links resolved: what a spec written by
// hand runs as its hook.
func selfPath() (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	return filepath.EvalSymlinks(self)
}

// runCDIHook is the createContainer hook of the CDI spec: the engine made
// the device and the mounts; this registers the libraries with the loader
// and links nvidia-smi when an NVIDIA driver folder was mounted.
func runCDIHook(cfg config.Config, stdin io.Reader) error {
	logger, closeLog := newLogger(cfg)
	defer closeLog()
	log := logger.WithField("stage", "cdi-hook")
	err := cdiHook(cfg, stdin, log)
	if err != nil {
		log.Errorf("%v", err)
		return fmt.Errorf("cdi-hook: %w", err)
	}
	return nil
}

func cdiHook(cfg config.Config, stdin io.Reader, log *logrus.Entry) error {
	st, err := oci.ReadState(stdin)
	if err != nil {
		return err
	}
	spec, err := oci.LoadSpec(st.Bundle)
	if err != nil {
		return err
	}
	rootfs, err := spec.RootPath(st.Bundle)
	if err != nil {
		return err
	}
	var env []string
	if spec.Process != nil {
		env = spec.Process.Env
	}
	req, err := cdispec.FromEnv(env)
	if err != nil {
		return err
	}
	log = log.WithFields(logrus.Fields{"bundle": st.Bundle, "pid": st.Pid})
	if len(req.Selections) == 0 {
		// A spec from before the selections: the engine mounted the
		// folders it names; register the libraries and link nvidia-smi.
		return legacyCDIHook(cfg, rootfs, log)
	}
	node, err := devnode.Stat(cfg.DxgDevice)
	if err != nil {
		return err
	}
	// The engine allowed the node in the container's device cgroup, which
	// this hook runs in: it can enumerate.
	host, skippedAdapters, err := gpuhost.Probe(node, hostOptions(cfg))
	for _, s := range skippedAdapters {
		log.Warnf("skipped %v", s)
	}
	if err != nil {
		return err
	}
	r, err := req.ToRequest(host.Inventory.Adapters)
	if err != nil {
		return err
	}
	c := gpuplan.FromSpec(spec, gpuplan.CreateContainer, st.Pid, r, userns.RunningInUserNS())
	c.Injected = true
	plan, err := gpuplan.Decide(c, host)
	if err != nil {
		return err
	}
	log.Infof("request %s selects %d of %d adapters", r.Source, len(plan.Selected), len(host.Inventory.Adapters))
	for _, w := range plan.Warnings {
		log.Warnf("%v", w)
	}
	steps, skipped := cdiSteps(plan.Steps, rootfs)
	for _, s := range skipped {
		log.Infof("skip %s: already mounted (by a hook that ran before: the other spec file's, or a prestart hook)", s)
	}
	plan.Steps = steps
	log.Infof("plan: %s", plan)
	// createContainer runs in the container's mount namespace: no nsenter.
	return applyPlan(rootfs, plan.Steps, log)
}

// cdiSteps drops from plan every bind whose source is already mounted at
// its target: both spec files' hooks run when a container asks for
// nvidia.com/gpu and wsl-gpu-hook.dev/gpu, and the second must not mount
// again. A bind is recognised by its target being the source's very
// directory (same device and inode), resolved inside the rootfs.
func cdiSteps(plan []mounts.Step, rootfs string) (steps, skipped []mounts.Step) {
	for _, s := range plan {
		switch {
		case s.Kind == mounts.Bind && sameDir(s.Source, rootfs, s.Target):
			skipped = append(skipped, s)
			continue
		}
		steps = append(steps, s)
	}
	return steps, skipped
}

// sameDir reports whether target, inside rootfs, is the host directory
// source: a bind mount of it is there.
func sameDir(source, rootfs, target string) bool {
	var src unix.Stat_t
	if err := unix.Stat(source, &src); err != nil {
		return false
	}
	h, err := pathrs.OpenInRoot(rootfs, target)
	if err != nil {
		return false
	}
	defer h.Close()
	var dst unix.Stat_t
	if err := unix.Fstat(int(h.Fd()), &dst); err != nil {
		return false
	}
	return dst.Mode&unix.S_IFMT == unix.S_IFDIR && src.Dev == dst.Dev && src.Ino == dst.Ino
}

// legacyCDIHook serves specs that name the folders themselves.
func legacyCDIHook(cfg config.Config, rootfs string, log *logrus.Entry) error {
	entries, err := ldcacheEntries(cfg)
	if err != nil {
		return err
	}
	var steps []mounts.Step
	for _, s := range mounts.Plan(mounts.Inputs{Ldcache: entries, NvidiaSmi: cdiNvidiaSmi(cfg, rootfs)}) {
		// The engine already made the device and the mounts.
		if s.Kind != mounts.Device && s.Kind != mounts.Bind {
			steps = append(steps, s)
		}
	}
	return applyPlan(rootfs, steps, log)
}

// ldcacheEntries returns the loader-cache entries for the lib dir, or nil
// when the configuration leaves the cache alone.
func ldcacheEntries(cfg config.Config) ([]ldcache.Entry, error) {
	if cfg.Ldcache != config.LdcacheBuiltin {
		return nil, nil
	}
	entries, err := ldcache.ScanDir(cfg.LibDir, mounts.ContainerLibDir)
	if err != nil {
		return nil, fmt.Errorf("scan %s for the loader cache: %w", cfg.LibDir, err)
	}
	if entries == nil {
		entries = []ldcache.Entry{}
	}
	return entries, nil
}

// cdiNvidiaSmi returns the nvidia-smi to link when the container got an
// NVIDIA driver folder: the CDI device chosen decides, not the host.
func cdiNvidiaSmi(cfg config.Config, rootfs string) string {
	// The rootfs is the image's: resolve confined to it, follow nothing.
	h, err := pathrs.OpenInRoot(rootfs, mounts.ContainerDriversDir)
	if err != nil {
		return ""
	}
	defer h.Close()
	dir, err := pathrs.Reopen(h, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return ""
	}
	defer dir.Close()
	names, err := dir.Readdirnames(-1)
	if err != nil {
		return ""
	}
	for _, n := range names {
		fd, err := unix.Openat(int(dir.Fd()), n, unix.O_PATH|unix.O_NOFOLLOW|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			continue
		}
		var st unix.Stat_t
		found := unix.Fstatat(fd, "libcuda.so.1.1", &st, unix.AT_SYMLINK_NOFOLLOW) == nil
		unix.Close(fd)
		if found {
			return nvidiaSmi(cfg, []string{n})
		}
	}
	return ""
}
