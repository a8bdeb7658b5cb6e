// Command wsl-gpu-dra-driver is the Dynamic Resource Allocation driver
// (resource.k8s.io/v1, driver gpu.wsl-gpu-hook.dev) for WSL2 GPUs: it
// publishes one ResourceSlice pool per node with one device per adapter,
// described by attributes CEL selectors read, prepares claims as transient
// CDI specs the container runtime applies, reports device health to the
// kubelet and republishes when the host's adapters change. It is a
// separate binary so the hook never links the Kubernetes client.
//
//	wsl-gpu-dra-driver --node-name NODE [--config FILE] [--kubeconfig FILE] [--cdi-dir DIR] [--hook PATH] ...
//
// The decisions live in package dra; package dra/driver wires them to the
// kubelet plugin library.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/config"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/devnode"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/driverstore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/gpuhost"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/kube/dra"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/kube/dra/driver"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/kube/lifecycle"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/setup/cdiinstall"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/cli"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/usage/gpumetrics"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/usage/metricsserver"
)

// version is set by the Makefile at link time.
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(cli.Report(os.Stdout, os.Stderr, "wsl-gpu-dra-driver", err))
}

// doc is the help's text around the flags.
var doc = cli.Doc{Prog: "wsl-gpu-dra-driver", Args: "[flags]", Summary: "The Dynamic Resource Allocation driver (gpu.wsl-gpu-hook.dev) for WSL2 GPUs:\none ResourceSlice pool per node, claims prepared as CDI specs, as the Helm\nchart runs it."}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("wsl-gpu-dra-driver", flag.ContinueOnError)
	cfgPath := fs.String("config", "", "configuration file (default $"+config.Env+", else "+config.DefaultPath+")")
	nodeName := fs.String("node-name", os.Getenv("NODE_NAME"), "this node's name: the pool's name (default $NODE_NAME)")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig `file`; \"\" uses the in-cluster service account")
	pluginDir := fs.String("plugin-dir", filepath.Join(kubeletplugin.KubeletPluginsDir, dra.DriverName), "`dir` of the DRA socket and the checkpoint")
	registrarDir := fs.String("registrar-dir", kubeletplugin.KubeletRegistryDir, "the kubelet's plugin registration `dir`")
	cdiDir := fs.String("cdi-dir", "/var/run/cdi", "`dir` for the claims' CDI specs (one the container runtime reads)")
	hook := fs.String("hook", "/usr/local/bin/wsl-gpu-hook", "the hook's path on the host, which the CDI specs run")
	hookConfig := fs.String("hook-config", "", "configuration `file` on the host the specs' hook reads; \"\" leaves it its defaults (--config is this process's file, which may exist only in its container)")
	interval := fs.Duration("interval", 10*time.Second, "re-list the adapters this often")
	healthTimeout := fs.Duration("health-timeout", 30*time.Second, "how long the kubelet trusts a device health report (resent at a third of it)")
	debug := fs.Bool("debug", false, "log at debug level")
	showVersion := fs.Bool("version", false, "print the version and exit")
	step := fs.String("memory-step", "256Mi", "share adapters by memory: each claim consumes a multiple of this `quantity` of an adapter's memory; 0 gives each claim a whole adapter")
	def := fs.String("memory-default", "1Gi", "memory a claim that asks for none consumes (`quantity`)")
	metricsAddr := fs.String("metrics-listen", "", "serve what the prepared claims were promised (wsl_gpu_claim_memory_bytes) at `ADDR`/metrics; \"\" serves none")
	webConfig := fs.String("web-config-file", "", "exporter-toolkit web configuration `file` for the metrics (TLS, basic auth); \"\" serves plain HTTP")
	daemonSet := fs.String("daemonset", "", "this pod's DaemonSet `NAME`, in the pod's namespace: at a stop, remove the claims' specs and the checkpoint only if it is gone (the chart's uninstall)")
	if err := cli.ParseFlags(fs, args, doc); err != nil {
		return err
	}
	if err := cli.NoArgs(fs.Args(), fs, doc); err != nil {
		return err
	}
	if *showVersion {
		fmt.Fprintf(stderr, "wsl-gpu-dra-driver %s\n", version)
		return nil
	}
	if *nodeName == "" {
		return errors.New("no node name: pass --node-name or set NODE_NAME (the chart sets it from spec.nodeName)")
	}
	sharing, err := parseSharing(*step, *def)
	if err != nil {
		return cli.Usagef("%v", err)
	}
	cfg, err := config.Load(config.Find(*cfgPath, os.Getenv))
	if err != nil {
		return fmt.Errorf("%w: fix the configuration file", err)
	}
	level := slog.LevelInfo
	if *debug {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	restCfg, err := restConfig(*kubeconfig)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return fmt.Errorf("API client: %w", err)
	}
	if err := os.MkdirAll(*pluginDir, 0o750); err != nil {
		return err
	}
	install := cdiinstall.System(*hook, *hookConfig)
	d, err := driver.New(ctx, driver.Config{
		Pool:       *nodeName,
		CDIDir:     *cdiDir,
		Checkpoint: filepath.Join(*pluginDir, "checkpoint.json"),
		// The chart mounts the plugin dir at its host path: the kubelet
		// finds the socket there, and the engines the metadata files.
		MetadataDir: filepath.Join(*pluginDir, "claims"),
		Sharing:     sharing,
		List: func() (*driverstore.Inventory, error) {
			return gpuhost.List(cfg.DxgDevice, gpuhost.Options{LibDir: cfg.LibDir, DriversDir: cfg.DriversDir, Resources: true})
		},
		Spec:          install.SpecOptions(devnode.Node{Path: cfg.DxgDevice}, cfg.LibDir),
		HealthTimeout: *healthTimeout,
		Log:           log,
	})
	if err != nil {
		return err
	}
	log.Info("starting", "version", version, "driver", dra.DriverName, "node", *nodeName, "config", cfg.Path(),
		"device", cfg.DxgDevice, "cdi-dir", *cdiDir, "devices", len(d.Devices()))
	helper, err := kubeletplugin.Start(ctx, d,
		kubeletplugin.DriverName(dra.DriverName),
		kubeletplugin.NodeName(*nodeName),
		kubeletplugin.KubeClient(client),
		kubeletplugin.PluginDataDirectoryPath(*pluginDir),
		kubeletplugin.RegistrarDirectoryPath(*registrarDir),
	)
	if err != nil {
		return fmt.Errorf("start the kubelet plugin: %w", err)
	}
	defer helper.Stop()
	if err := d.SetPublisher(ctx, helper); err != nil {
		return err
	}
	if *metricsAddr != "" {
		stop, err := serveClaims(ctx, d, *metricsAddr, *webConfig, log)
		if err != nil {
			return err
		}
		defer stop()
	}
	d.Watch(ctx, *interval, cfg.DriversDir, filepath.Dir(cfg.DxgDevice))
	// Running pods' containers need their claims' specs at every start: a
	// stop removes them only when it is the chart's uninstall.
	v := lifecycle.DecideInCluster(*daemonSet)
	log.Info("stopping: " + v.Reason)
	if v.Uninstall {
		if err := d.RemoveAll(); err != nil {
			log.Warn("uninstall: claim specs or checkpoint left", "err", err)
		} else {
			log.Info("uninstall: removed every claim spec and the checkpoint")
		}
	}
	return nil
}

// parseSharing reads --memory-step and --memory-default.
func parseSharing(step, def string) (dra.Sharing, error) {
	var s dra.Sharing
	for _, f := range []struct {
		flag, value string
		to          *int64
	}{{"memory-step", step, &s.Step}, {"memory-default", def, &s.Default}} {
		q, err := resource.ParseQuantity(f.value)
		if err != nil {
			return s, fmt.Errorf("--%s %q: %w: write a quantity such as 256Mi or 1Gi", f.flag, f.value, err)
		}
		*f.to = q.Value()
	}
	if err := s.Validate(); err != nil {
		return s, fmt.Errorf("--memory-step and --memory-default: %w", err)
	}
	return s, nil
}

// serveClaims serves the claims' promised memory at addr until the
// returned func is called.
func serveClaims(ctx context.Context, d *driver.Driver, addr, webConfig string, log *slog.Logger) (func(), error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(gpumetrics.NewClaims(func() []gpumetrics.ClaimMemory {
		ps := d.Promises()
		out := make([]gpumetrics.ClaimMemory, len(ps))
		for i, p := range ps {
			out[i] = gpumetrics.ClaimMemory{GPU: p.Device, Namespace: p.Namespace, Claim: p.Name, Bytes: p.Memory}
		}
		return out
	}))
	srv, err := metricsserver.ListenFlag(metricsserver.Options{Addr: addr, WebConfigFile: webConfig, Limits: metricsserver.DefaultLimits(), Log: log}, reg, "--metrics-listen")
	if err != nil {
		return nil, err
	}
	log.Info("serving the claims' promised memory", "addr", srv.Addr().String())
	return srv.Start(ctx), nil
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		c, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("in-cluster API config: %w: run in a pod or pass --kubeconfig", err)
		}
		return c, nil
	}
	c, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	return c, nil
}
