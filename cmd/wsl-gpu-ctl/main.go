// Command wsl-gpu-ctl is wsl-gpu-hook's command for people: list the GPU
// adapters, check the host and the engines, write the CDI specs, and
// install the hook into Docker, podman, containerd and CDI. wsl-gpu-hook,
// which engines run on every container start, hands these commands over,
// so both `wsl-gpu-ctl install docker` and `wsl-gpu-hook install docker`
// work.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/config"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/cli"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/vendorstack"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/wsl"
)

// version is set by the Makefile at link time.
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args, os.Stdin, os.Stdout, os.Stderr)
	stop()
	// Messages carry the name the user typed: wsl-gpu-hook hands its
	// commands over with its own argv[0].
	name := wsl.CtlName
	if len(os.Args) > 0 && os.Args[0] != "" {
		name = filepath.Base(os.Args[0])
	}
	os.Exit(cli.Report(os.Stderr, name, err, usage))
}

const usage = `usage:
  wsl-gpu-ctl [--config FILE] info [--json] [--k8s]                      (list GPU adapters; --k8s: the device plugin's resources)
  wsl-gpu-ctl [--config FILE] doctor [--json] [--root DIR]               (check the host and engines; exit 1 on a failure)
  wsl-gpu-ctl [--config FILE] cdi generate [--dir DIR] [--hook PATH] [--skip-kind KIND]...
                                          (write the CDI specs, default /etc/cdi; --output FILE|- [--kind KIND] for one)
  wsl-gpu-ctl install|uninstall [--dry-run] [--prefix DIR] [--hook PATH] [--user] [--nvidia-kind=ours|skip] [--amd-kind=ours|skip]
                                docker|podman|containerd|cdi...
  wsl-gpu-ctl [--config FILE] top [--interval D] [--once] [--json]     (GPU memory, engine busy %, processes per adapter)
  wsl-gpu-ctl [--config FILE] metrics [--listen ADDR] [--web-config-file FILE] [--interval D]
                                          (serve the same as Prometheus metrics, default 127.0.0.1:9835, sampled
                                           every 10s; the file: TLS and basic auth, as Prometheus exporters take it)
  wsl-gpu-ctl version
(wsl-gpu-hook runs each of these too.)
`

// run is the whole program; main only prints its error.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	c, err := cli.Parse(wsl.CtlName, config.DefaultPath, args[1:])
	if err != nil {
		return err
	}
	cmd, cmdArgs := c.Name, c.Args
	if cmd == "version" {
		fmt.Fprintf(stdout, "%s %s\n", wsl.CtlName, version)
		return nil
	}
	if !wsl.IsCtlCommand(cmd) {
		return cli.Usagef("unknown command %q", cmd)
	}
	cfg, err := config.Load(config.Find(c.ConfigPath, os.Getenv))
	if err != nil {
		return fmt.Errorf("%s: %w: fix the configuration file", cmd, err)
	}
	switch cmd {
	case "info":
		return runInfo(cfg, cmdArgs, stdout)
	case "doctor":
		return runDoctor(cfg, cmdArgs, stdout)
	case "cdi":
		return runCDI(cfg, cmdArgs, stdout)
	case "top":
		return runTop(ctx, cfg, cmdArgs, stdout)
	case "metrics":
		return runMetrics(ctx, cfg, cmdArgs, stdout, stderr)
	case "install":
		return runInstall(cfg, cmdArgs, stdout, false)
	default: // uninstall
		return runInstall(cfg, cmdArgs, stdout, true)
	}
}

func stackOptions(cfg config.Config) vendorstack.ProbeOptions {
	return vendorstack.ProbeOptions{ROCmDir: cfg.ROCmDir, DRIDir: cfg.DRIDir, WSLgDir: cfg.WSLgDir}
}

// hookPath is the wsl-gpu-hook binary engines are to run: the one next to
// this binary.
func hookPath() (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find own executable: %w", err)
	}
	return wsl.HookBeside(self)
}
