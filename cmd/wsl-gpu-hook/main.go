// Command wsl-gpu-hook gives containers on WSL2 the GPU: the OCI hook that
// mounts /dev/dxg, the Windows user-mode driver libraries and the selected
// driver store folders into the container, the CDI specs' createContainer
// hook, and the OCI runtime wrapper (as wsl-gpu-runtime).
//
// It runs on every container start, so it holds only what a start needs.
// The commands people type (info, doctor, cdi generate, install) are
// wsl-gpu-ctl's, installed next to it; this binary hands them over, so
// `wsl-gpu-hook install docker` works as well.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/config"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/cli"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/gpuplan"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/wsl"
)

// version is set by the Makefile at link time.
var version = "dev"

func main() {
	growStack()
	err := run(context.Background(), os.Args, os.Stdin, os.Stdout, os.Stderr)
	var admin adminCommand
	if errors.As(err, &admin) {
		err = admin.exec(os.Args)
	}
	os.Exit(cli.Report(os.Stderr, wsl.HookName, err, usage))
}

const usage = `usage:
  wsl-gpu-hook [--config FILE] prestart|createRuntime|createContainer   (OCI hook: state on stdin)
  wsl-gpu-hook [--config FILE] cdi-hook SELECTION...                      (a CDI device's createContainer hook)
  wsl-gpu-hook runtime RUNC-ARGS...                                      (OCI runtime wrapper; also as wsl-gpu-runtime)
  wsl-gpu-hook version
  wsl-gpu-hook [--config FILE] info|doctor|cdi|install|uninstall ...     (run by wsl-gpu-ctl: see wsl-gpu-ctl --help)
`

// run is the whole program but for handing admin commands over; main only
// prints its error.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if filepath.Base(args[0]) == wsl.WrapperName {
		return runRuntime(args[1:])
	}
	c, err := cli.Parse(wsl.HookName, config.DefaultPath, args[1:])
	if err != nil {
		return err
	}
	// Docker's --gpus runs "nvidia-container-runtime-hook prestart".
	if filepath.Base(args[0]) == wsl.NvidiaHookName && c.Name == "prestart" {
		c.Name = string(gpuplan.Prestart)
	}
	cmd, cmdArgs := c.Name, c.Args
	switch {
	case cmd == "runtime":
		return runRuntime(cmdArgs)
	case cmd == "version":
		fmt.Fprintf(stdout, "wsl-gpu-hook %s\n", version)
		return nil
	case wsl.IsCtlCommand(cmd):
		return adminCommand{cmd}
	}
	stage := gpuplan.Stage(cmd)
	if !stage.Valid() && cmd != "cdi-hook" {
		return cli.Usagef("unknown command %q", cmd)
	}
	// The CDI hook's arguments are its device's selections.
	if len(cmdArgs) > 0 && cmd != "cdi-hook" {
		return cli.Usagef("%s takes no arguments", cmd)
	}
	cfg, err := config.Load(config.Find(c.ConfigPath, os.Getenv))
	if err != nil {
		return fmt.Errorf("%s: %w: fix the configuration file", cmd, err)
	}
	if cmd == "cdi-hook" {
		return runCDIHook(cfg, stdin, stderr, cmdArgs)
	}
	return runHook(stage, cfg, stdin, stderr)
}

// adminCommand is a command wsl-gpu-ctl runs: run returns it so that main,
// not run, replaces the process.
type adminCommand struct{ name string }

func (a adminCommand) Error() string {
	return fmt.Sprintf("%s is a %s command", a.name, wsl.CtlName)
}

// exec runs wsl-gpu-ctl in place of this process with the same arguments,
// argv[0] included, so that its messages carry the name the user typed.
// It returns only on failure.
func (a adminCommand) exec(args []string) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("%s: find own executable: %w", a.name, err)
	}
	ctl, err := wsl.CtlBeside(self)
	if err != nil {
		return fmt.Errorf("%s: %w", a.name, err)
	}
	err = syscall.Exec(ctl, args, os.Environ())
	return fmt.Errorf("%s: run %s: %w", a.name, ctl, err)
}
