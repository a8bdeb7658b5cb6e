// Command wsl-gpu-device-plugin is the kubelet device plugin for WSL2 GPUs:
// it advertises one extended resource per GPU vendor present (nvidia.com/gpu,
// amd.com/gpu, gpu.intel.com/dxg by default), one device per adapter, keeps
// their health current, answers Allocate with CDI names plus the device,
// mounts and environment for runtimes without CDI, and writes a
// node-feature-discovery feature file. It is a separate binary so the hook,
// which runs on every container start, never links gRPC.
//
//	wsl-gpu-device-plugin [--config FILE] [--plugin-dir DIR] [--interval D] [--feature-file FILE]
//
// The decisions live in package deviceplugin; `wsl-gpu-hook info --k8s`
// prints them without running anything.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/gpuhost"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/gpustats"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/config"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/deviceplugin"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/deviceplugin/server"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/driverstore"
)

// version is set by the Makefile at link time.
var version = "dev"

// configEnv names a config file, as for the hook.
const configEnv = "WSL_GPU_HOOK_CONFIG"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "wsl-gpu-device-plugin: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("wsl-gpu-device-plugin", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "", "configuration file (default $"+configEnv+", else "+config.DefaultPath+")")
	pluginDir := fs.String("plugin-dir", "/var/lib/kubelet/device-plugins", "the kubelet's device plugin `dir` (holds kubelet.sock)")
	interval := fs.Duration("interval", 30*time.Second, "re-list the adapters this often")
	features := fs.String("feature-file", deviceplugin.DefaultFeatureFile, "node-feature-discovery feature `file` to keep current; \"\" writes none")
	debug := fs.Bool("debug", false, "log at debug level")
	showVersion := fs.Bool("version", false, "print the version and exit")
	metricsAddr := fs.String("metrics-listen", "", "serve GPU metrics for Prometheus at `ADDR`/metrics (e.g. :9835); \"\" serves none")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *showVersion {
		fmt.Fprintf(stderr, "wsl-gpu-device-plugin %s\n", version)
		return nil
	}
	path, explicit := *cfgPath, *cfgPath != ""
	if !explicit {
		path, explicit = os.Getenv(configEnv), true
	}
	if path == "" {
		path, explicit = config.DefaultPath, false
	}
	cfg, err := config.Load(path, explicit)
	if err != nil {
		return fmt.Errorf("%w: fix the configuration file", err)
	}
	level := slog.LevelInfo
	if *debug {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	opt := deviceplugin.OptionsFrom(cfg)
	log.Info("starting", "version", version, "config", orDefaults(cfg.Path()), "device", cfg.DxgDevice, "plugin-dir", *pluginDir,
		"cdi", opt.CDI, "replicas", opt.Replicas)
	health := &gpustats.HealthCheck{Device: cfg.DxgDevice, Timeout: 5 * time.Second}
	m := server.New(server.Config{
		PluginDir:   *pluginDir,
		Options:     opt,
		Interval:    *interval,
		FeatureFile: *features,
		List: func() (*driverstore.Inventory, error) {
			inv, err := gpuhost.List(cfg.DxgDevice, gpuhost.Options{LibDir: cfg.LibDir, DriversDir: cfg.DriversDir})
			if err == nil {
				// Adapters whose statistics queries fail turn unhealthy.
				if herr := health.Mark(inv); herr != nil {
					log.Debug("GPU statistics health unavailable", "err", herr)
				}
			}
			return inv, err
		},
		Log: log,
	})
	if *metricsAddr != "" {
		stopMetrics, err := serveMetrics(ctx, cfg.DxgDevice, *metricsAddr, log)
		if err != nil {
			return err
		}
		defer stopMetrics()
	}
	return m.Run(ctx)
}

func orDefaults(p string) string {
	if p == "" {
		return "(defaults)"
	}
	return p
}
