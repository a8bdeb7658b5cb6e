// Command wsl-gpu-device-plugin is the kubelet device plugin for WSL2 GPUs:
// it advertises one extended resource per GPU vendor present (nvidia.com/gpu,
// amd.com/gpu, gpu.intel.com/dxg, qualcomm.com/gpu by default), one device per adapter, keeps
// their health current, answers Allocate with CDI names plus the device,
// mounts and environment for runtimes without CDI, and writes a
// node-feature-discovery feature file. It is a separate binary so the hook,
// which runs on every container start, never links gRPC.
//
//	wsl-gpu-device-plugin [--config FILE] [--plugin-dir DIR] [--interval D] [--feature-file FILE] [--hold-resources NAMES]
//	                      [--metrics-listen ADDR [--metrics-interval D] [--web-config-file FILE]]
//	                      [--node-root DIR [--hook-dir DIR] [--cdi-dir DIR] [--setup-only]]
//
// With --node-root (the node's paths as mounted in the plugin's container,
// as the Helm chart does) it also sets the node up: copies the hook and
// wsl-gpu-ctl from the image into --hook-dir and keeps the CDI specs in
// --cdi-dir current every interval; --setup-only does the setup once and
// exits (the chart's init container). A stop removes none of it, nor the
// node's labels, unless the stop is the chart's uninstall: with
// --daemonset (the pod's own DaemonSet) it asks the API server whether the
// DaemonSet is gone (package lifecycle). --uninstall-daemonset NAME is the
// chart's pre-delete hook: it deletes the DaemonSet and waits for its pods
// to clean their nodes.
//
// The decisions live in package deviceplugin; `wsl-gpu-hook info --k8s`
// prints them without running anything.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/gpuhost"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/usage/gpustats"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/config"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/driverstore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/kube/deviceplugin"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/kube/deviceplugin/server"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/kube/kubeapi"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/kube/lifecycle"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/kube/nodeagent"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/kube/nodelabels"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/kube/nodesetup"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/kube/podresources"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/cli"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/wsl"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/usage/containernames"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/usage/gpumetrics"
)

// version is set by the Makefile at link time.
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(cli.Report(os.Stdout, os.Stderr, "wsl-gpu-device-plugin", err))
}

// doc is the help's text around the flags.
var doc = cli.Doc{Prog: "wsl-gpu-device-plugin", Args: "[flags]", Summary: "The kubelet device plugin for WSL2 GPUs: one extended resource per GPU vendor,\none device per adapter, kept healthy; with --node-root it also sets the node\nup (the hook and CDI specs), as the Helm chart runs it."}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("wsl-gpu-device-plugin", flag.ContinueOnError)
	cfgPath := fs.String("config", "", "configuration file (default $"+config.Env+", else "+config.DefaultPath+")")
	pluginDir := fs.String("plugin-dir", "/var/lib/kubelet/device-plugins", "the kubelet's device plugin `dir` (holds kubelet.sock)")
	interval := fs.Duration("interval", 30*time.Second, "re-list the adapters this often")
	features := fs.String("feature-file", deviceplugin.DefaultFeatureFile, "node-feature-discovery feature `file` to keep current; \"\" writes none")
	debug := fs.Bool("debug", false, "log at debug level")
	showVersion := fs.Bool("version", false, "print the version and exit")
	metricsAddr := fs.String("metrics-listen", "", "serve GPU metrics for Prometheus at `ADDR`/metrics (e.g. :9835); \"\" serves none")
	podResources := fs.String("pod-resources-socket", podresources.DefaultSocket, "the kubelet's PodResources `socket`: which pod holds each adapter (wsl_gpu_allocation_info); \"\" asks nothing")
	namesDir := fs.String("container-names-dir", "", "the kubelet's container log links `dir` (/var/log/containers on the node): name GPU processes' pods and containers; \"\" leaves ids")
	metricsInterval := fs.Duration("metrics-interval", 10*time.Second, "sample the GPU metrics this often; busy ratios are over one interval")
	webConfig := fs.String("web-config-file", "", "exporter-toolkit web configuration `file` for the metrics (TLS, basic auth); \"\" serves plain HTTP")
	nodeRoot := fs.String("node-root", "", "the node's paths are mounted under `DIR` here: set the node up (hook copy, CDI specs); undone at the chart's uninstall only")
	hookDir := fs.String("hook-dir", nodesetup.DefaultHookDir, "node `dir` the hook and wsl-gpu-ctl are copied into (with --node-root)")
	cdiDir := fs.String("cdi-dir", nodesetup.DefaultCDIDir, "node CDI spec `dir` kept current (with --node-root)")
	setupOnly := fs.Bool("setup-only", false, "set the node up once and exit (with --node-root)")
	labelNode := fs.Bool("node-labels", false, "label this node (NODE_NAME) with its GPUs through the API server, with the pod's service account; removed at uninstall")
	daemonSet := fs.String("daemonset", "", "this pod's DaemonSet `NAME`, in the pod's namespace: at a stop, remove the node setup and labels only if it is gone (the chart's uninstall)")
	uninstall := fs.String("uninstall-daemonset", "", "delete the DaemonSet `NAME` in the pod's namespace, wait for its pods to clean their nodes, and exit (the chart's pre-delete hook)")
	uninstallTimeout := fs.Duration("uninstall-timeout", 2*time.Minute, "how long --uninstall-daemonset waits for the pods")
	hold := fs.String("hold-resources", "", "comma-separated extended resource `NAMES` to register even with no device (the chart's with dra.enabled): the kubelet then keeps serving pods that hold them")
	unlabel := fs.Bool("remove-node-labels", false, "remove the --node-labels labels from every node and exit (after --uninstall-daemonset: the chart's pre-delete hook)")
	if err := cli.ParseFlags(fs, args, doc); err != nil {
		return err
	}
	if err := cli.NoArgs(fs.Args(), fs, doc); err != nil {
		return err
	}
	if *showVersion {
		fmt.Fprintf(stderr, "wsl-gpu-device-plugin %s\n", version)
		return nil
	}
	if *metricsInterval < time.Second {
		return cli.Usagef("--metrics-interval must be at least 1s: sampling more often only costs the Windows host")
	}
	if *setupOnly && *nodeRoot == "" {
		return cli.Usagef("--setup-only needs --node-root")
	}
	if *uninstall != "" {
		// Pods that cannot stop (their node is down) leave files that
		// cost nothing: say so, and let the uninstall go on.
		var left *lifecycle.PodsLeftError
		if err := uninstallDaemonSet(ctx, *uninstall, *uninstallTimeout, stderr); errors.As(err, &left) {
			fmt.Fprintf(stderr, "warning: %v\n", err)
		} else if err != nil {
			return err
		}
	}
	if *unlabel {
		return removeNodeLabels(ctx, stderr)
	}
	if *uninstall != "" {
		return nil
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
	// What the pod puts on its node, undone at an uninstall only
	// (package nodeagent holds the order).
	agent := nodeagent.Agent{Log: log, Decide: func() lifecycle.Verdict { return lifecycle.DecideInCluster(*daemonSet) }}
	if *nodeRoot != "" {
		self, err := os.Executable()
		if err != nil {
			return err
		}
		dir := filepath.Dir(self)
		setup := nodesetup.Setup{Root: *nodeRoot, HookDir: *hookDir, CDIDir: *cdiDir,
			Binaries: []string{filepath.Join(dir, "wsl-gpu-hook"), filepath.Join(dir, "wsl-gpu-ctl")}}
		if *setupOnly {
			nodeagent.SetupOnce(setup.Apply, log)
			return nil
		}
		agent.Keep = func(ctx context.Context) { setup.Keep(ctx, *interval, log) }
		agent.Remove = setup.Remove
	}
	opt := deviceplugin.OptionsFrom(cfg)
	log.Info("starting", "version", version, "config", orDefaults(cfg.Path()), "device", cfg.DxgDevice, "plugin-dir", *pluginDir,
		"cdi", opt.CDI, "replicas", opt.Replicas)
	health := &gpustats.HealthCheck{Device: cfg.DxgDevice, Timeout: 5 * time.Second}
	if *labelNode {
		if os.Getenv("NODE_NAME") == "" {
			return fmt.Errorf("node labels: the node's name is unknown: set NODE_NAME from spec.nodeName")
		}
		client, err := nodelabels.InCluster(os.Getenv("NODE_NAME"))
		if err != nil {
			return err
		}
		l := &nodelabels.Labeler{Client: client, Log: log}
		agent.Label, agent.Unlabel = l.Update, l.Remove
	}
	return agent.Run(ctx, func(ctx context.Context, onInventory func(*driverstore.Inventory)) error {
		return servePlugin(ctx, cfg, opt, health, onInventory, pluginFlags{pluginDir: *pluginDir, interval: *interval, features: *features,
			metricsAddr: *metricsAddr, podResources: *podResources, namesDir: *namesDir, metricsInterval: *metricsInterval, webConfig: *webConfig,
			hold: holdResources(*hold)}, log)
	})
}

// pluginFlags are the flags the plugin and its metrics take.
type pluginFlags struct {
	pluginDir, features, metricsAddr, podResources, namesDir, webConfig string
	interval, metricsInterval                                           time.Duration
	// hold are --hold-resources' names.
	hold []string
}

// servePlugin runs the device plugin, and its metrics when asked, until
// ctx ends or the plugin fails.
func servePlugin(ctx context.Context, cfg config.Config, opt deviceplugin.Options, health *gpustats.HealthCheck,
	onInventory func(*driverstore.Inventory), f pluginFlags, log *slog.Logger) error {
	m := server.New(server.Config{
		OnInventory: onInventory,
		Hold:        f.hold,
		PluginDir:   f.pluginDir,
		Options:     opt,
		Interval:    f.interval,
		FeatureFile: f.features,
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
	if f.metricsAddr != "" {
		var names []containernames.Source
		if f.namesDir != "" {
			names = append(names, containernames.KubeletLogs{Dir: f.namesDir})
		}
		var allocs *gpumetrics.Allocations
		if f.podResources != "" {
			filter := podresources.Filter{Resources: map[string]bool{}, Driver: wsl.DRADriver}
			for _, r := range opt.Resources {
				filter.Resources[r] = true
			}
			filter.Resources[opt.NPUResource] = true
			allocs = gpumetrics.NewAllocations(func(ctx context.Context) ([]gpumetrics.Allocation, error) {
				as, err := podresources.List(ctx, f.podResources, filter)
				out := make([]gpumetrics.Allocation, len(as))
				for i, a := range as {
					out[i] = gpumetrics.Allocation(a)
				}
				return out, err
			}, f.metricsInterval)
		}
		stopMetrics, err := serveMetrics(ctx, cfg.DxgDevice, cfg.DriversDir, f.metricsAddr, f.webConfig, f.metricsInterval, names, allocs, log)
		if err != nil {
			return err
		}
		defer stopMetrics()
	}
	return m.Run(ctx)
}

// uninstallDaemonSet is the chart's pre-delete hook.
func uninstallDaemonSet(ctx context.Context, name string, timeout time.Duration, stderr io.Writer) error {
	api, err := kubeapi.InCluster(kubeapi.ServiceAccountDir)
	if err != nil {
		return err
	}
	ns, err := kubeapi.Namespace(kubeapi.ServiceAccountDir)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return lifecycle.Uninstall(ctx, api, ns, name, time.Second, stderr)
}

// removeNodeLabels takes the labels --node-labels sets off every node,
// printing one line per node changed.
func removeNodeLabels(ctx context.Context, stderr io.Writer) error {
	client, err := nodelabels.InCluster("")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	removed, err := client.RemoveAll(ctx)
	nodes := slices.Sorted(maps.Keys(removed))
	for _, n := range nodes {
		fmt.Fprintf(stderr, "node %s: removed %s\n", n, strings.Join(removed[n], " "))
	}
	if err == nil && len(nodes) == 0 {
		fmt.Fprintln(stderr, "no node has labels of ours")
	}
	return err
}

func orDefaults(p string) string {
	if p == "" {
		return "(defaults)"
	}
	return p
}

// holdResources splits --hold-resources.
func holdResources(s string) []string {
	var out []string
	for _, r := range strings.Split(s, ",") {
		if r = strings.TrimSpace(r); r != "" && !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out
}
