package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/config"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/gpuplan"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/hookrun"
)

// runHook is the OCI hook at stage (package hookrun).
func runHook(stage gpuplan.Stage, cfg config.Config, stdin io.Reader) error {
	return runJob(cfg, string(stage), func() (*hookrun.Job, error) { return hookrun.OCI(stage, cfg, stdin) })
}

// runCDIHook is the createContainer hook of a CDI device of ours; its
// arguments are the device's selections (package hookrun).
func runCDIHook(cfg config.Config, stdin io.Reader, selections []string) error {
	return runJob(cfg, "cdi-hook", func() (*hookrun.Job, error) { return hookrun.CDI(stdin, selections) })
}

// runJob reads a job through its entry and runs it, logging to the
// configured log; the error is the one line runtimes show.
func runJob(cfg config.Config, name string, entry func() (*hookrun.Job, error)) error {
	logger, closeLog := newLogger(cfg)
	defer closeLog()
	log := logger.WithField("stage", name)
	job, err := entry()
	if err == nil {
		err = job.Run(cfg, log)
	}
	if err != nil {
		log.Errorf("%v", err)
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// newLogger opens the configured log file. A log that cannot be opened must
// not cost the user their GPU, so it falls back to discarding.
func newLogger(cfg config.Config) (*logrus.Logger, func()) {
	log := logrus.New()
	log.SetOutput(io.Discard)
	log.SetFormatter(&logrus.TextFormatter{DisableColors: true, FullTimestamp: true})
	if lvl, err := logrus.ParseLevel(strings.ToLower(cfg.LogLevel)); err == nil {
		log.SetLevel(lvl)
	}
	if cfg.LogFile == "" {
		return log, func() {}
	}
	// O_APPEND makes each entry (one write) land whole even when many hooks
	// log at once.
	f, err := os.OpenFile(cfg.LogFile, os.O_WRONLY|os.O_APPEND|os.O_CREATE|unix.O_CLOEXEC, 0o640)
	if err != nil {
		return log, func() {}
	}
	log.SetOutput(f)
	return log, func() { f.Close() }
}
