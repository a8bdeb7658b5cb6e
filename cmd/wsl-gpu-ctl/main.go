// Command wsl-gpu-ctl is wsl-gpu-hook's command for people: list the GPU
// adapters, check the host and the engines, write the CDI specs, and
// install the hook into Docker, podman, containerd and CDI. wsl-gpu-hook,
// which engines run on every container start, hands these commands over,
// so both `wsl-gpu-ctl install docker` and `wsl-gpu-hook install docker`
// work.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/config"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/stackprobe"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/cli"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/wsl"
)

// version is set by the Makefile at link time.
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args, os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(cli.Report(os.Stdout, os.Stderr, progName(os.Args), err))
}

// progName is the name the user typed: wsl-gpu-hook hands its commands
// over with its own argv[0], and messages and help carry it.
func progName(args []string) string {
	if len(args) > 0 && args[0] != "" {
		return filepath.Base(args[0])
	}
	return wsl.CtlName
}

// run is the whole program; main only prints its error or help.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	name, cmds := progName(args), commands()
	c, err := cli.Parse(topDoc(name, cmds).Text(nil), args[1:])
	if err != nil {
		return err
	}
	cmd, path, rest, err := find(cmds, c.Name, c.Args)
	if err != nil {
		return err
	}
	if cmd.define == nil { // cdi --help
		return cli.Help{Text: cmd.doc(name, path, nil).Text(nil)}
	}
	fs := flag.NewFlagSet(path, flag.ContinueOnError)
	runCmd := cmd.define(fs)
	doc := cmd.doc(name, path, fs)
	// Flags may follow the arguments too (`install cdi --nvidia-kind=ours`,
	// as the conflict message suggests).
	var words []string
	for {
		if err := cli.ParseFlags(fs, rest, doc); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		words, rest = append(words, fs.Arg(0)), fs.Args()[1:]
	}
	if len(cmd.words) == 0 {
		if err := cli.NoArgs(words, fs, doc); err != nil {
			return err
		}
	}
	e := env{stdout: stdout, stderr: stderr}
	if !cmd.noConfig {
		if e.cfg, err = config.Load(config.Find(c.ConfigPath, os.Getenv)); err != nil {
			return fmt.Errorf("%s: %w: fix the configuration file", c.Name, err)
		}
	}
	return runCmd(ctx, e, words)
}

func stackOptions(cfg config.Config) stackprobe.Options {
	return stackprobe.Options{ROCmDir: cfg.ROCmDir, DRIDir: cfg.DRIDir, WSLgDir: cfg.WSLgDir}
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
