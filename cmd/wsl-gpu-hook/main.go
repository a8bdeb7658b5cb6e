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
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/cli"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/wsl"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/gpuplan"
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
	os.Exit(cli.Report(os.Stdout, os.Stderr, wsl.HookName, err))
}

// The help texts are constants: nothing is built on a container start.
const (
	help = `usage: wsl-gpu-hook [--config FILE] COMMAND [ARGS...]

Gives containers on WSL2 the GPU: /dev/dxg, the Windows user-mode driver
libraries and the selected driver store folders. Engines run it on every
container start.

commands:
  prestart, createRuntime, createContainer
                 The OCI hook at that stage (the container's state on stdin).
  cdi-hook SELECTION...
                 A CDI device's createContainer hook.
  runtime RUNC-ARGS...
                 The OCI runtime wrapper (also run as wsl-gpu-runtime).
  version        Print the version.
  help [COMMAND] Print this help, or a command's (as COMMAND --help does).
  info, doctor, cdi, install, uninstall, top, metrics
                 wsl-gpu-ctl's commands, run by it: see wsl-gpu-ctl --help.

--config FILE is the configuration (default $WSL_GPU_HOOK_CONFIG, else
/etc/wsl-gpu-hook/config.toml).
`
	stageHelp = `
The OCI hook, as runc and crun run it at that stage with the container's
state on stdin: when the container asks for GPUs (WSL_GPU_DEVICES,
NVIDIA_VISIBLE_DEVICES or the request annotation) it mounts /dev/dxg, the
driver libraries and the selected driver store folders; otherwise it does
nothing. As nvidia-container-runtime-hook, prestart is Docker's --gpus.
`
	cdiHookHelp = `usage: wsl-gpu-hook [--config FILE] cdi-hook SELECTION...

A CDI device's createContainer hook, as the specs of wsl-gpu-ctl cdi generate
run it: the container's state on stdin, the device's adapters as arguments
(all, vendor:NAME, vendor:NAME:N, index:N or luid:0xHEX).
`
	runtimeHelp = `usage: wsl-gpu-hook runtime RUNC-ARGS...
       wsl-gpu-runtime RUNC-ARGS...

The OCI runtime wrapper: on create or run of a container that asks for GPUs
it adds /dev/dxg and the hook to the bundle, then runs the real runtime with
the arguments untouched (wsl-gpu-runtime --help is the real runtime's). The
configuration is $WSL_GPU_HOOK_CONFIG or the default.
`
	versionHelp = `usage: wsl-gpu-hook version

Print the version.
`
)

// run is the whole program but for handing admin commands over; main only
// prints its error or help.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if filepath.Base(args[0]) == wsl.WrapperName {
		return runRuntime(args[1:])
	}
	c, err := cli.Parse(help, args[1:])
	if err != nil {
		return err
	}
	// Docker's --gpus runs "nvidia-container-runtime-hook prestart".
	if filepath.Base(args[0]) == wsl.NvidiaHookName && c.Name == "prestart" {
		c.Name = string(gpuplan.Prestart)
	}
	cmd, cmdArgs := c.Name, c.Args
	// Engines never pass a help word: a stage takes no arguments, a CDI
	// hook selections, and the wrapper is run as wsl-gpu-runtime.
	askHelp := len(cmdArgs) > 0 && cli.IsHelpArg(cmdArgs[0])
	stage := gpuplan.Stage(cmd)
	switch {
	case wsl.IsCtlCommand(cmd):
		return adminCommand{cmd}
	case cmd == "runtime" && askHelp:
		return cli.Help{Text: runtimeHelp}
	case cmd == "runtime":
		return runRuntime(cmdArgs)
	case cmd == "version" && askHelp:
		return cli.Help{Text: versionHelp}
	case cmd == "version" && len(cmdArgs) > 0:
		return cli.CmdUsagef(cmd, "takes no arguments")
	case cmd == "version":
		fmt.Fprintf(stdout, "wsl-gpu-hook %s\n", version)
		return nil
	case cmd == "cdi-hook" && askHelp:
		return cli.Help{Text: cdiHookHelp}
	case cmd == "cdi-hook":
	case !stage.Valid():
		return cli.Usagef("unknown command %q", cmd)
	case askHelp:
		return cli.Help{Text: "usage: wsl-gpu-hook [--config FILE] " + cmd + "\n" + stageHelp}
	case len(cmdArgs) > 0:
		return cli.CmdUsagef(cmd, "takes no arguments")
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
