package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/gpumetrics"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/gpustats"
)

// serveMetrics serves gpumetrics at addr until ctx ends. A node whose
// device does not open (no /dev/dxg: a WSL node without a GPU, or not WSL)
// serves none and says why once: the plugin still runs there, advertising
// nothing, as the chart deploys it on every node. An address that cannot
// be listened on is an error.
func serveMetrics(ctx context.Context, device, addr string, log *slog.Logger) (func(), error) {
	s, err := gpustats.Open(gpustats.Options{Device: device, ProcessRescan: 10 * time.Second})
	if err != nil {
		log.Warn("serving no GPU metrics: the device does not open", "err", err)
		return func() {}, nil
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(gpumetrics.New(s))
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{MaxRequestsInFlight: 2, Timeout: 10 * time.Second}))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("metrics: %w: pick a free address with --metrics-listen", err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server stopped", "err", err)
		}
	}()
	log.Info("serving GPU metrics", "addr", ln.Addr().String())
	return func() {
		shutdown, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
		s.Close()
	}, nil
}
