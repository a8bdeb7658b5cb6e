package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/config"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/cli"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/usage/containernames"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/usage/gpumetrics"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/usage/gpustats"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/usage/metricsserver"
)

func metricsCommand() command {
	return command{name: "metrics",
		summary: "Serve the GPU statistics as Prometheus metrics at /metrics.\nThe numbers top shows, sampled every --interval, until interrupted.",
		define: func(fs *flag.FlagSet) runFunc {
			listen := fs.String("listen", "127.0.0.1:9835", "serve /metrics at `ADDR`")
			webConfig := fs.String("web-config-file", "", "exporter-toolkit web configuration `FILE` (TLS, basic auth)")
			interval := fs.Duration("interval", 10*time.Second, "sample this often; busy ratios are over one interval")
			return func(ctx context.Context, e env, _ []string) error {
				if *interval < time.Second {
					return cli.CmdUsagef("metrics", "--interval must be at least 1s")
				}
				return runMetrics(ctx, e.cfg, *listen, *webConfig, *interval, e.stdout, e.stderr)
			}
		}}
}

// runMetrics serves the GPU statistics for Prometheus at /metrics until
// ctx ends (SIGINT/SIGTERM in main).
func runMetrics(ctx context.Context, cfg config.Config, listen, webConfig string, interval time.Duration, stdout, stderr io.Writer) error {
	// The server's own log (the toolkit's, a bad web configuration at a
	// request) goes to stderr; stdout says where it serves.
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	reg := prometheus.NewRegistry()
	srv, err := metricsserver.ListenFlag(metricsserver.Options{Addr: listen, WebConfigFile: webConfig,
		Limits: metricsserver.DefaultLimits(), Log: log}, reg, "--listen")
	if err != nil {
		return err
	}
	s, err := gpustats.Open(gpustats.Options{Device: cfg.DxgDevice, DriversDir: cfg.DriversDir, ProcessRescan: 10 * time.Second, Names: containernames.OnThisHost()})
	if err != nil {
		srv.Close()
		return fmt.Errorf("metrics: %w", err)
	}
	defer s.Close()
	poller := gpustats.Poll(s, interval)
	defer poller.Stop()
	reg.MustRegister(gpumetrics.New(poller))
	if webConfig != "" {
		fmt.Fprintf(stdout, "serving GPU metrics on %s/metrics as %s says\n", srv.Addr(), webConfig)
	} else {
		fmt.Fprintf(stdout, "serving GPU metrics on http://%s/metrics\n", srv.Addr())
	}
	if err := srv.Serve(ctx); err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	return nil
}
