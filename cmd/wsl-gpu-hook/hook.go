package main

import (
	"fmt"
	"io"

	"github.com/moby/sys/userns"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/config"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/wsl"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/gpuplan"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/hooklog"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/hookrun"
)

// runHook is the OCI hook at stage (package hookrun).
func runHook(stage gpuplan.Stage, cfg config.Config, stdin io.Reader, stderr io.Writer) error {
	return runJob(cfg, string(stage), stderr, func() (*hookrun.Job, error) { return hookrun.OCI(stage, cfg, stdin) })
}

// runCDIHook is the createContainer hook of a CDI device of ours; its
// arguments are the device's selections (package hookrun).
func runCDIHook(cfg config.Config, stdin io.Reader, stderr io.Writer, selections []string) error {
	return runJob(cfg, "cdi-hook", stderr, func() (*hookrun.Job, error) { return hookrun.CDI(stdin, selections) })
}

// runJob reads a job through its entry and runs it, logging to the
// configured log; the error is the one line runtimes show, printed last.
func runJob(cfg config.Config, name string, stderr io.Writer, entry func() (*hookrun.Job, error)) error {
	logger := openLog(cfg, stderr)
	defer logger.Close()
	log := logger.With("stage", name)
	job, err := entry()
	if err == nil {
		err = job.Run(cfg, log)
		job.Close()
	}
	if err != nil {
		log.Errorf("%v", err)
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// openLog opens the configured log at the configured level (info if the
// level is unknown, which config.Load does not let through), or syslog
// where the hook may not write it (hooklog.OpenHook). A log file refused
// (a link, a file others may write) is one line on stderr: a log that
// cannot be written must not cost the user their GPU.
func openLog(cfg config.Config, stderr io.Writer) *hooklog.Logger {
	level, err := hooklog.ParseLevel(cfg.LogLevel)
	if err != nil {
		level = hooklog.Info
	}
	log, err := hooklog.OpenHook(hooklog.HookOptions{File: cfg.LogFile, Syslog: cfg.LogSyslog, Tag: wsl.HookName,
		Level: level, UserNS: userns.RunningInUserNS()})
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", wsl.HookName, err)
	}
	return log
}
