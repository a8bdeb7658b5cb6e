package main

import (
	"fmt"
	"os"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/config"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/wrapper"
)

// runRuntime is the binary as wsl-gpu-runtime (package wrapper). Every
// argument is the real runtime's, so the configuration comes from
// $WSL_GPU_HOOK_CONFIG or the default.
func runRuntime(args []string) error {
	path, explicit := config.Find("", os.Getenv)
	cfg, err := config.Load(path, explicit)
	if err != nil {
		return fmt.Errorf("runtime: %w: fix the configuration file", err)
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("runtime: find own executable for the hook: %w", err)
	}
	err = wrapper.Run(args, wrapper.Options{Config: cfg, ConfigPath: path, ExplicitConfig: explicit, Self: self, Stderr: os.Stderr})
	return fmt.Errorf("runtime: %w", err)
}
