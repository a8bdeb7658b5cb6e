// Package wsl names, once, the paths WSL gives a GPU-enabled VM and the
// names this project's binary and engine entries go by.
//
// The container paths equal the host paths on purpose: applications and
// NVIDIA's loaders look for the driver files where WSL puts them.
package wsl

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

// Names of this project's binary and of what it installs.
const (
	// HookName is the binary's own name and its argv[0] in hooks.
	HookName = "wsl-gpu-hook"
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
