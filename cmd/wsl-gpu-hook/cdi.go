package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	pathrs "github.com/cyphar/filepath-securejoin/pathrs-lite"
	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
	cdiparser "tags.cncf.io/container-device-interface/pkg/parser"
	cdi "tags.cncf.io/container-device-interface/specs-go"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/config"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/cdispec"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/driverstore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/dxcore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/ldcache"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/mounts"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/oci"
)

// defaultCDIPath is where engines look for generated specs.
const defaultCDIPath = "/etc/cdi/wsl-gpu-hook.json"

func runCDI(cfg config.Config, args []string, stdout io.Writer) error {
	if len(args) == 0 || args[0] != "generate" {
		return usageError{"cdi: want `cdi generate [--output FILE]`"}
	}
	fs := flag.NewFlagSet("cdi generate", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	out := fs.String("output", defaultCDIPath, `where to write the spec ("-" for stdout)`)
	if err := fs.Parse(args[1:]); err != nil {
		return usageError{"cdi generate: " + err.Error()}
	}
	spec, err := generateCDI(cfg)
	if err != nil {
		return fmt.Errorf("cdi generate: %w", err)
	}
	data, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return err
	}
	data = append(data, '\n')
	if *out == "-" {
		_, err := stdout.Write(data)
		return err
	}
	old, err := os.ReadFile(*out)
	if err == nil && bytes.Equal(old, data) {
		return nil // unchanged: engines watching the dir see no event
	}
	if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
		return fmt.Errorf("cdi generate: %w", err)
	}
	tmp := *out + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return fmt.Errorf("cdi generate: %w", err)
	}
	if err := os.Rename(tmp, *out); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("cdi generate: %w", err)
	}
	return nil
}

func generateCDI(cfg config.Config) (*cdi.Spec, error) {
	dev, err := statDevice(cfg.DxgDevice)
	if err != nil {
		return nil, err
	}
	enum, err := dxcore.Enumerate(cfg.DxgDevice)
	if err != nil {
		return nil, err
	}
	inv, err := driverstore.Build(enum.Adapters, driverstore.Options{LibDir: cfg.LibDir, DriversDir: cfg.DriversDir})
	if err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	args := []string{"wsl-gpu-hook"}
	if cfg.Path() != "" && cfg.Path() != config.DefaultPath {
		args = append(args, "--config", cfg.Path())
	}
	spec, err := cdispec.Generate(inv, cdispec.Options{Device: dev, LibDir: cfg.LibDir, DriversDir: cfg.DriversDir, HookPath: self, HookArgs: args})
	if err != nil {
		return nil, err
	}
	return spec, validateCDI(spec)
}

// validateCDI checks what engines check when they load the spec.
func validateCDI(spec *cdi.Spec) error {
	var errs []error
	vendor, class := cdiparser.ParseQualifier(spec.Kind)
	errs = append(errs, cdiparser.ValidateVendorName(vendor), cdiparser.ValidateClassName(class), cdi.ValidateVersion(spec))
	for _, d := range spec.Devices {
		errs = append(errs, cdiparser.ValidateDeviceName(d.Name))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("generated CDI spec is invalid: %w", err)
	}
	return nil
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
