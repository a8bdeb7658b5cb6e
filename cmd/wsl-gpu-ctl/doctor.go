package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/config"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/setup/doctor"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/cli"
)

func doctorCommand() command {
	return command{name: "doctor",
		summary: "Check the host and the engines, and say what to fix.\nThe exit status is 1 when a check fails.",
		define: func(fs *flag.FlagSet) runFunc {
			asJSON := fs.Bool("json", false, "print JSON")
			k8s := fs.Bool("k8s", false, "check the kind, minikube and k3d node containers instead")
			root := fs.String("root", "", "read engine configuration, binaries and CDI dirs under `DIR` (a chroot or a test tree)")
			return func(ctx context.Context, e env, _ []string) error {
				if *k8s && *root != "" {
					return cli.CmdUsagef("doctor", "--root is for the host checks; --k8s asks the engines: use one")
				}
				return runDoctor(ctx, e.cfg, doctorFlags{asJSON: *asJSON, k8s: *k8s, root: *root}, e.stdout)
			}
		}}
}

type doctorFlags struct {
	asJSON, k8s bool
	root        string
}

// runDoctor wires the configuration into package doctor and prints its
// report; the checks and their wording live there.
func runDoctor(ctx context.Context, cfg config.Config, f doctorFlags, stdout io.Writer) error {
	o := doctor.Options{
		DxgDevice:     cfg.DxgDevice,
		LibDir:        cfg.LibDir,
		DriversDir:    cfg.DriversDir,
		LogFile:       cfg.LogFile,
		ROCmDir:       cfg.ROCmDir,
		NoLog:         cfg.LogFile == "",
		Sysfs:         cfg.SysfsDir,
		NoSysfs:       cfg.SysfsDir == "",
		SonameCache:   cfg.SonameCache,
		NoSonameCache: cfg.SonameCache == "",
		Root:          f.root,
	}
	if hook, err := hookPath(); err == nil {
		o.Self = hook
	}
	if f.root == "" {
		o.Version = engineVersion
	}
	if f.root == "" {
		// The engines the CLIs reach: kind's nodes, Docker Desktop's.
		o.Engine = func(cli string, args ...string) ([]byte, error) { return engineCLI(ctx, 20*time.Second, cli, args...) }
	}
	var rep *doctor.Report
	if f.k8s {
		rep = doctor.RunNodes(o)
	} else {
		rep = doctor.Run(o)
	}
	var err error
	if f.asJSON {
		err = rep.WriteJSON(stdout)
	} else {
		err = rep.WriteText(stdout)
	}
	if err != nil {
		return err
	}
	if rep.Failed() {
		return fmt.Errorf("doctor: %d of %d checks failed: see their fix", count(rep, doctor.Fail), len(rep.Results))
	}
	return nil
}

func count(r *doctor.Report, s doctor.Status) int {
	n := 0
	for _, c := range r.Results {
		if c.Status == s {
			n++
		}
	}
	return n
}

// engineVersion is the first line of `path --version`, bounded in time:
// a wedged engine binary must not hang the doctor.
func engineVersion(path string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, filepath.Clean(path), "--version").Output()
	if err != nil {
		return ""
	}
	line, _, _ := bufio.NewReader(bytes.NewReader(out)).ReadLine()
	return string(line)
}

// engineCLI runs `cli args...` for doctor --k8s, bounded in time as
// engineVersion is. It returns standard output also on failure (inspect
// prints the containers it found beside one that is gone), and an error
// that reads as the first line of standard error.
func engineCLI(ctx context.Context, timeout time.Duration, cli string, args ...string) ([]byte, error) {
	path, err := exec.LookPath(cli)
	if err != nil {
		return nil, err // wraps exec.ErrNotFound
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var stderr bytes.Buffer
	c := exec.CommandContext(ctx, path, args...)
	c.Stderr = &stderr
	out, err := c.Output()
	if err != nil {
		if line := firstLine(strings.TrimSpace(stderr.String())); line != "" {
			return out, stderrError{line, err}
		}
	}
	return out, err
}

// stderrError is a CLI's failure as the CLI said it: the first line of
// its standard error, which says more than its exit status.
type stderrError struct {
	line string
	err  error
}

func (e stderrError) Error() string { return e.line }
func (e stderrError) Unwrap() error { return e.err }
