// Package testbin builds the project's binaries for the tests that run
// them (test/e2e, test/engines): the static hook, the dxgsim simulator and
// stepkill, from the main module wherever the calling test's module is.
package testbin

import (
	"bytes"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Module is the main module's path.
const Module = "github.com/wsl-gpu-hook/wsl-gpu-hook"

// Root returns the main module's directory, as the go command in the
// working directory resolves it (directly, or through a test module's
// replace directive).
func Root() (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", Module).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		return "", fmt.Errorf("go list -m %s: %w\n%s", Module, err, stderr)
	}
	dir := string(bytes.TrimSpace(out))
	if dir == "" {
		return "", fmt.Errorf("go list -m %s: no directory", Module)
	}
	return dir, nil
}

// Hook builds the hook and wsl-gpu-ctl beside it, static as they ship
// (CGO_ENABLED=0, -trimpath), at dir/wsl-gpu-hook and dir/wsl-gpu-ctl, and
// returns the hook's path: the hook hands info, doctor, cdi and install to
// the wsl-gpu-ctl next to it.
func Hook(dir string) (string, error) {
	if _, err := Build(dir, "wsl-gpu-ctl", "./cmd/wsl-gpu-ctl", true); err != nil {
		return "", err
	}
	return Build(dir, "wsl-gpu-hook", "./cmd/wsl-gpu-hook", true)
}

// HookFor is Hook for another architecture (GOARCH goarch), as make build
// GOARCH=goarch builds it: for the tests that run it under an emulator.
func HookFor(dir, goarch string) (string, error) {
	env := []string{"GOOS=linux", "GOARCH=" + goarch}
	if _, err := BuildEnv(dir, "wsl-gpu-ctl", "./cmd/wsl-gpu-ctl", true, env...); err != nil {
		return "", err
	}
	return BuildEnv(dir, "wsl-gpu-hook", "./cmd/wsl-gpu-hook", true, env...)
}

// Dxgsim builds the simulator at dir/dxgsim.
func Dxgsim(dir string) (string, error) {
	return Build(dir, "dxgsim", "./test/dxgsim", false)
}

// Stepkill builds test/stepkill, static (it runs as a container's hook),
// at dir/stepkill.
func Stepkill(dir string) (string, error) {
	return Build(dir, "stepkill", "./test/stepkill", true)
}

// Build builds pkg, a path relative to the main module's root, at
// dir/name. A static build is checked to have no program interpreter.
func Build(dir, name, pkg string, static bool) (string, error) {
	return BuildEnv(dir, name, pkg, static)
}

// BuildEnv is Build with env (NAME=VALUE) added to the go command's.
func BuildEnv(dir, name, pkg string, static bool, env ...string) (string, error) {
	root, err := Root()
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, name)
	args := []string{"build", "-o", out}
	if static {
		args = append(args, "-trimpath")
	}
	cmd := exec.Command("go", append(args, pkg)...)
	cmd.Dir = root
	cmd.Env = os.Environ()
	if static {
		cmd.Env = append(cmd.Env, "CGO_ENABLED=0")
	}
	cmd.Env = append(cmd.Env, env...)
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go %s: %w\n%s", strings.Join(cmd.Args[1:], " "), err, msg)
	}
	if static {
		if err := CheckStatic(out); err != nil {
			return "", err
		}
	}
	return out, nil
}

// CheckStatic fails for an ELF file that asks for a program interpreter.
func CheckStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked: it must be built with CGO_ENABLED=0", path)
		}
	}
	return nil
}
