package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/config"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/cli"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/gpumetrics"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/gpustats"
)

// runMetrics serves the GPU statistics for Prometheus at /metrics until
// ctx ends (SIGINT/SIGTERM in main).
func runMetrics(ctx context.Context, cfg config.Config, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("metrics", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	listen := fs.String("listen", "127.0.0.1:9835", "address to serve /metrics on")
	if err := fs.Parse(args); err != nil {
		return cli.UsageError{Msg: "metrics: " + err.Error()}
	}
	s, err := gpustats.Open(gpustats.Options{Device: cfg.DxgDevice, ProcessRescan: 10 * time.Second})
	if err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	defer s.Close()
	reg := prometheus.NewRegistry()
	reg.MustRegister(gpumetrics.New(s))
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{MaxRequestsInFlight: 2, Timeout: 10 * time.Second}))
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("metrics: %w: pick a free address with --listen", err)
	}
	fmt.Fprintf(stdout, "serving GPU metrics on http://%s/metrics\n", ln.Addr())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("metrics: %w", err)
	}
	return nil
}
