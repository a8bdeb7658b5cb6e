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
	"time"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/config"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/doctor"
)

func doctorCommand() command {
	return command{name: "doctor",
		summary: "Check the host and the engines, and say what to fix.\nThe exit status is 1 when a check fails.",
		define: func(fs *flag.FlagSet) runFunc {
			asJSON := fs.Bool("json", false, "print JSON")
			root := fs.String("root", "", "read engine configuration, binaries and CDI dirs under `DIR` (a chroot or a test tree)")
			return func(_ context.Context, e env, _ []string) error {
				return runDoctor(e.cfg, *asJSON, *root, e.stdout)
			}
		}}
}

// runDoctor wires the configuration into package doctor and prints its
// report; the checks and their wording live there.
func runDoctor(cfg config.Config, asJSON bool, root string, stdout io.Writer) error {
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
		Root:          root,
	}
	if hook, err := hookPath(); err == nil {
		o.Self = hook
	}
	if root == "" {
		o.Version = engineVersion
	}
	rep := doctor.Run(o)
	var err error
	if asJSON {
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
