// Package wsl names, once, the paths WSL gives a GPU-enabled VM and the
// names this project's binary and engine entries go by.
//
// The container paths equal the host paths on purpose: applications and
// NVIDIA's loaders look for the driver files where WSL puts them.
package wsl

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
)

// Paths WSL uses on the host, and that containers get at the same place.
const (
	// Device is the GPU paravirtualization device.
	Device = "/dev/dxg"
	// Dir holds the lib dir and the drivers dir.
	Dir = "/usr/lib/wsl"
	// LibDir is where Windows puts the user-mode libraries (libdxcore,
	// libd3d12, libcuda) every vendor's stack starts from.
	LibDir = Dir + "/lib"
	// DriversDir holds one driver store folder per Windows driver.
	DriversDir = Dir + "/drivers"
)

// Names of this project's binaries and of what they install.
const (
	// HookName is the binary engines run on every container start, and
	// its argv[0] in hooks.
	HookName = "wsl-gpu-hook"
	// DRADriver is the DRA driver's name: the domain of its attributes,
	// its DeviceClasses' selectors and its CDI kind.
	DRADriver = "gpu.wsl-gpu-hook.dev"
	// CtlName is the binary of the commands people run (CtlCommands),
	// installed next to the hook: the hook links none of their packages,
	// which would cost every container start their initialisation.
	CtlName = "wsl-gpu-ctl"
	// WrapperName is the binary's name as an OCI runtime (a link to the
	// hook): it adds the GPU to a bundle and then runs the real runtime.
	WrapperName = "wsl-gpu-runtime"
	// RuntimeName is the runtime's name in Docker's daemon.json and the
	// containerd runtime handler's name (`--runtime wsl-gpu`).
	RuntimeName = "wsl-gpu"
	// NvidiaHookName is the executable Docker's --gpus runs as a prestart
	// hook; the binary answers to it too.
	NvidiaHookName = "nvidia-container-runtime-hook"
)

// CtlCommands are wsl-gpu-ctl's commands, which wsl-gpu-hook hands over
// (wsl-gpu-ctl's tests hold its command table to them).
func CtlCommands() []string {
	return []string{"info", "doctor", "cdi", "install", "uninstall", "top", "metrics"}
}

// IsCtlCommand says whether cmd is one of CtlCommands.
func IsCtlCommand(cmd string) bool {
	return slices.Contains(CtlCommands(), cmd)
}

// CtlBeside returns wsl-gpu-ctl next to the binary at self (links
// resolved), as make build and the package install them.
func CtlBeside(self string) (string, error) {
	return beside(self, CtlName, "install it next to "+HookName+" (make build puts both in bin/)")
}

// HookBeside returns wsl-gpu-hook next to the binary at self (links
// resolved): what wsl-gpu-ctl installs into engine configurations and CDI
// specs unless told otherwise.
func HookBeside(self string) (string, error) {
	return beside(self, HookName, "install it next to "+CtlName+", or name it with --hook PATH")
}

func beside(self, name, fix string) (string, error) {
	dir := filepath.Dir(self)
	if real, err := filepath.EvalSymlinks(self); err == nil {
		dir = filepath.Dir(real)
	}
	p := filepath.Join(dir, name)
	fi, err := os.Stat(p)
	if err != nil {
		return "", fmt.Errorf("no %s next to %s: %s", name, self, fix)
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return "", fmt.Errorf("%s is not an executable file: %s", p, fix)
	}
	return p, nil
}
