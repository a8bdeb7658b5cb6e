package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/usage/containernames"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/usage/gpumetrics"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/usage/gpustats"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/usage/metricsserver"
)

// serveMetrics serves gpumetrics, sampled every interval, at addr until
// ctx ends or the returned func is called, which stops the server and
// closes the device. A node whose
// device does not open (no /dev/dxg: a WSL node without a GPU, or not
// WSL) serves none and says why once: the plugin still runs there,
// advertising nothing, as the chart deploys it on every node. An address
// that cannot be listened on, or a web configuration that does not load,
// is an error.
func serveMetrics(ctx context.Context, device, driversDir, addr, webConfig string, interval time.Duration, names []containernames.Source,
	allocs *gpumetrics.Allocations, log *slog.Logger) (func(), error) {
	s, err := gpustats.Open(gpustats.Options{Device: device, DriversDir: driversDir, ProcessRescan: 10 * time.Second, Names: names})
	if err != nil {
		log.Warn("serving no GPU metrics: the device does not open", "err", err)
		return func() {}, nil
	}
	poller := gpustats.Poll(s, interval)
	reg := prometheus.NewRegistry()
	reg.MustRegister(gpumetrics.New(poller))
	if allocs != nil {
		reg.MustRegister(allocs)
	}
	srv, err := metricsserver.ListenFlag(metricsserver.Options{Addr: addr, WebConfigFile: webConfig,
		Limits: metricsserver.DefaultLimits(), Log: log}, reg, "--metrics-listen")
	if err != nil {
		poller.Stop()
		s.Close()
		return nil, err
	}
	log.Info("serving GPU metrics", "addr", srv.Addr().String(), "web-config-file", webConfig)
	stop := srv.Start(ctx)
	return func() {
		stop()
		poller.Stop()
		s.Close()
	}, nil
}
