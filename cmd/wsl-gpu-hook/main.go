// Command wsl-gpu-hook gives containers on WSL2 the GPU: an OCI hook that
// mounts /dev/dxg, the Windows user-mode driver libraries and the selected
// driver store folders into the container, plus an `info` command.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/sirupsen/logrus"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/config"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/gpuplan"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/wsl"
)

// version is set by the Makefile at link time.
var version = "dev"

func main() {
	// Libraries (opencontainers/cgroups) log through logrus's standard
	// logger, which writes to stderr; stderr is reserved for the one line
	// runtimes show users, and the hook logs through its own logger.
	logrus.StandardLogger().SetOutput(io.Discard)
	err := run(context.Background(), os.Args, os.Stdin, os.Stdout, os.Stderr)
	if err == nil {
		return
	}
	var uerr usageError
	if errors.As(err, &uerr) {
		fmt.Fprintf(os.Stderr, "wsl-gpu-hook: %v\n\n%s", err, usage)
		os.Exit(2)
	}
	// One line: runtimes embed the hook's stderr in their own error.
	fmt.Fprintf(os.Stderr, "wsl-gpu-hook: %s\n", oneLine(err.Error()))
	os.Exit(1)
}

const usage = `usage:
  wsl-gpu-hook [--config FILE] prestart|createRuntime|createContainer   (OCI hook: state on stdin)
  wsl-gpu-hook [--config FILE] info [--json] [--k8s]                      (list GPU adapters; --k8s: the device plugin's resources)
  wsl-gpu-hook [--config FILE] doctor [--json] [--root DIR]               (check the host and engines; exit 1 on a failure)
  wsl-gpu-hook runtime RUNC-ARGS...                                      (OCI runtime wrapper; also as wsl-gpu-runtime)
  wsl-gpu-hook [--config FILE] cdi generate [--dir DIR] [--hook PATH] [--skip-kind KIND]...
                                           (write the CDI specs, default /etc/cdi; --output FILE|- [--kind KIND] for one)
  wsl-gpu-hook install|uninstall [--dry-run] [--prefix DIR] [--user] [--nvidia-kind=ours|skip] [--amd-kind=ours|skip]
                                 docker|podman|containerd|cdi...
  wsl-gpu-hook version
`

type usageError struct{ msg string }

func (u usageError) Error() string { return u.msg }

// run is the whole program; main only prints its error.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if filepath.Base(args[0]) == wsl.WrapperName {
		return runRuntime(args[1:])
	}
	fs := flag.NewFlagSet(wsl.HookName, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfgPath := fs.String("config", "", "configuration file (default "+config.DefaultPath+")")
	if err := fs.Parse(args[1:]); err != nil {
		return usageError{err.Error()}
	}
	rest := fs.Args()
	if len(rest) == 0 {
		return usageError{"no command given"}
	}
	// Docker's --gpus runs "nvidia-container-runtime-hook prestart".
	if filepath.Base(args[0]) == wsl.NvidiaHookName && len(rest) > 0 && rest[0] == "prestart" {
		rest[0] = string(gpuplan.Prestart)
	}
	cmd, cmdArgs := rest[0], rest[1:]
	if cmd == "runtime" {
		return runRuntime(cmdArgs)
	}
	if cmd == "version" {
		fmt.Fprintf(stdout, "wsl-gpu-hook %s\n", version)
		return nil
	}

	cfg, err := config.Load(config.Find(*cfgPath, os.Getenv))
	if err != nil {
		return fmt.Errorf("%s: %w: fix the configuration file", cmd, err)
	}

	if stage := gpuplan.Stage(cmd); stage.Valid() {
		if len(cmdArgs) > 0 {
			return usageError{fmt.Sprintf("%s takes no arguments", cmd)}
		}
		return runHook(stage, cfg, stdin)
	}
	switch cmd {
	case "info":
		return runInfo(cfg, cmdArgs, stdout)
	case "doctor":
		return runDoctor(cfg, cmdArgs, stdout)
	case "cdi":
		return runCDI(cfg, cmdArgs, stdout)
	case "cdi-hook":
		return runCDIHook(cfg, stdin)
	case "install":
		return runInstall(cfg, cmdArgs, stdout, false)
	case "uninstall":
		return runInstall(cfg, cmdArgs, stdout, true)
	}
	return usageError{fmt.Sprintf("unknown command %q", cmd)}
}

// oneLine folds a multi-line error (errors.Join) into the single line a
// runtime shows.
func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", "; ")), " ")
}
