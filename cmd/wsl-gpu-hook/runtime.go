package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/config"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/mounts"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/oci"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/request"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/specpatch"
)

// runtimeName is the second name of the binary: an OCI runtime that adds
// the GPU to a bundle and then runs the real runtime.
const runtimeName = "wsl-gpu-runtime"

// configEnv lets the runtime wrapper, which must pass every argument to the
// real runtime untouched, find a non-default configuration.
const configEnv = "WSL_GPU_HOOK_CONFIG"

// runcValueFlags are runc's global flags that take a separate value.
var runcValueFlags = map[string]bool{
	"--root": true, "--log": true, "--log-format": true, "--criu": true, "--rootless": true,
}

// runcArgs finds the command, the bundle and the log file in a runc
// command line. The bundle defaults to the working directory, as in runc.
func runcArgs(args []string) (cmd, bundle, logFile, logFormat string) {
	i := 0
	for ; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			break
		}
		name, val, hasVal := strings.Cut(a, "=")
		name = "--" + strings.TrimLeft(name, "-")
		if runcValueFlags[name] && !hasVal && i+1 < len(args) {
			i++
			val = args[i]
		}
		switch name {
		case "--log":
			logFile = val
		case "--log-format":
			logFormat = val
		}
	}
	if i == len(args) {
		return "", "", logFile, logFormat
	}
	cmd = args[i]
	for j := i + 1; j < len(args); j++ {
		a := args[j]
		switch {
		case a == "--bundle" || a == "-b":
			if j+1 < len(args) {
				bundle = args[j+1]
			}
		case strings.HasPrefix(a, "--bundle="):
			bundle = strings.TrimPrefix(a, "--bundle=")
		case strings.HasPrefix(a, "-b="):
			bundle = strings.TrimPrefix(a, "-b=")
		}
	}
	if bundle == "" {
		bundle, _ = os.Getwd()
	}
	return cmd, bundle, logFile, logFormat
}

// runRuntime is the wrapper: on create/run of a container that asks for
// GPUs it edits the bundle, then it execs the real runtime with args as given.
func runRuntime(args []string) error {
	cfgPath, explicit := os.Getenv(configEnv), true
	if cfgPath == "" {
		cfgPath, explicit = config.DefaultPath, false
	}
	cfg, err := config.Load(cfgPath, explicit)
	if err != nil {
		return fmt.Errorf("runtime: %w: fix the configuration file", err)
	}
	real, err := realRuntime(cfg.Runtime)
	if err != nil {
		return fmt.Errorf("runtime: %w", err)
	}
	cmd, bundle, logFile, logFormat := runcArgs(args)
	if cmd == "create" || cmd == "run" {
		if err := patchBundle(bundle, cfg, cfgPath, explicit); err != nil {
			err = fmt.Errorf("runtime: %w", err)
			writeRuntimeLog(logFile, logFormat, err)
			return err
		}
	}
	argv := append([]string{real}, args...)
	if err := syscall.Exec(real, argv, os.Environ()); err != nil {
		return fmt.Errorf("runtime: exec %s: %w", real, err)
	}
	return nil
}

// realRuntime resolves the configured runtime and refuses to resolve to
// this binary, which would exec itself forever.
func realRuntime(name string) (string, error) {
	p, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("find the real OCI runtime %q: %w: install runc or set runtime in the config", name, err)
	}
	p, err = filepath.Abs(p)
	if err != nil {
		return "", err
	}
	self, _ := os.Executable()
	if a, b := evalOrSelf(p), evalOrSelf(self); a == b {
		return "", fmt.Errorf("the configured runtime %q is this wrapper itself: set runtime in the config to the real runtime (runc)", name)
	}
	return p, nil
}

func evalOrSelf(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}

func patchBundle(bundle string, cfg config.Config, cfgPath string, explicit bool) error {
	spec, err := oci.LoadSpec(bundle)
	if err != nil {
		return err
	}
	req, err := request.FromSpec(spec, cfg.RequestEnv, cfg.RequestAnnotation)
	if err != nil {
		return fmt.Errorf("%w: fix the container's GPU request", err)
	}
	if req.None() {
		return nil
	}
	dev, err := statDevice(cfg.DxgDevice)
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find own executable for the hook: %w", err)
	}
	hookArgs := []string{"wsl-gpu-hook"}
	if explicit {
		hookArgs = append(hookArgs, "--config", cfgPath)
	}
	hook := specs.Hook{Path: self, Args: append(hookArgs, stagePrestart)}

	path := filepath.Join(bundle, "config.json")
	old, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read bundle config: %w", err)
	}
	patched, err := specpatch.AddGPU(old, specpatch.Device{Path: mounts.ContainerDevice, Major: int64(dev.Major), Minor: int64(dev.Minor)}, hook)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return writeAtomic(path, patched)
}

// writeAtomic replaces path so the runtime never reads half a config.
func writeAtomic(path string, data []byte) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	tmp := path + ".wsl-gpu-hook.tmp"
	if err := os.WriteFile(tmp, data, fi.Mode().Perm()); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("replace %s: %w", path, err)
	}
	return nil
}

// writeRuntimeLog puts the error where containerd's shim and Docker read a
// runtime's errors: runc's --log file, in its format.
func writeRuntimeLog(path, format string, e error) {
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	msg := "wsl-gpu-hook: " + oneLine(e.Error())
	if format == "json" {
		line, _ := json.Marshal(map[string]string{"level": "error", "msg": msg, "time": time.Now().Format(time.RFC3339Nano)})
		f.Write(append(line, '\n'))
		return
	}
	fmt.Fprintf(f, "time=%q level=error msg=%q\n", time.Now().Format(time.RFC3339Nano), msg)
}
