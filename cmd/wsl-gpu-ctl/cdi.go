package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	cdi "tags.cncf.io/container-device-interface/specs-go"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/config"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/devnode"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/gpuhost"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/stackprobe"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/kube/nodesetup"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/setup/cdiinstall"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/setup/cdispec"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/atomicfile"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/cli"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/capability"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/vendorstack"
)

func cdiGenerateCommand() command {
	return command{name: "generate",
		summary: "Write the CDI specs for this host's adapters.\nA spec is written only when it changes, and none while another producer\ndefines one of their device names.",
		define: func(fs *flag.FlagSet) runFunc {
			var flags cdiinstall.GenerateFlags
			flags.Define(fs)
			return func(_ context.Context, e env, _ []string) error {
				if err := flags.Check(); err != nil {
					return cli.CmdUsagef("cdi generate", "%v", err)
				}
				return runCDI(e.cfg, flags, e.stdout)
			}
		}}
}

// runCDI is `cdi generate`: the specs for this host, written only when
// they change, and not at all while another producer defines one of their
// device names.
func runCDI(cfg config.Config, flags cdiinstall.GenerateFlags, stdout io.Writer) error {
	var err error
	hook := flags.Hook
	if hook == "" {
		if hook, err = hookPath(); err != nil {
			return fmt.Errorf("cdi generate: %w", err)
		}
	}
	if flags.Dir == "" && flags.Output == "" {
		flags.Dir = cdiinstall.SystemSpecDir
		if os.Geteuid() != 0 {
			flags.Dir = cdiinstall.User("", "", os.Getenv("HOME"), os.Getenv("XDG_CONFIG_HOME"), "").SpecDir
		}
	}
	o := flags.Options(hook, specConfigPath(cfg))
	host, err := cdiHost(cfg)
	if err != nil {
		return fmt.Errorf("cdi generate: %w", err)
	}
	so := o.SpecOptions(host.Device, host.LibDir)
	so.Stack = host.Stack
	specs, err := cdispec.Generate(host.Inventory, so)
	if err != nil {
		return fmt.Errorf("cdi generate: %w", err)
	}
	if flags.Output != "" {
		return writeOneSpec(specs, flags, stdout)
	}
	// Sync checks first that no other producer defines our names (NVIDIA's
	// refresh service at boot writes nvidia.com/gpu=all): engines would
	// refuse them. Then it writes nothing and says so in one line.
	changed, err := cdiinstall.Sync(o, specs)
	for _, c := range changed {
		fmt.Fprintf(stdout, "cdi: wrote %s\n", c)
	}
	if err != nil {
		return fmt.Errorf("cdi generate: %w", err)
	}
	return nil
}

// writeOneSpec is --output: one kind's spec to a file or stdout.
func writeOneSpec(specs []*cdi.Spec, flags cdiinstall.GenerateFlags, stdout io.Writer) error {
	for _, s := range specs {
		if s.Kind != flags.Kind {
			continue
		}
		data, err := cdispec.Marshal(s)
		if err != nil {
			return err
		}
		if flags.Output == "-" {
			_, err := stdout.Write(data)
			return err
		}
		if old, err := os.ReadFile(flags.Output); err == nil && bytes.Equal(old, data) {
			return nil // unchanged: engines watching the dir see no event
		}
		if err := atomicfile.Write(flags.Output, data, 0o644, atomicfile.Keep); err != nil {
			return fmt.Errorf("cdi generate: %w", err)
		}
		return nil
	}
	return fmt.Errorf("cdi generate: this host has no adapter for kind %s", flags.Kind)
}

// cdiHost reads what the specs are made from.
func cdiHost(cfg config.Config) (cdiinstall.Host, error) {
	node, err := devnode.Stat(cfg.DxgDevice)
	if err != nil {
		return cdiinstall.Host{}, err
	}
	// The per-adapter devices carry selection variables: every detail.
	h, _, err := gpuhost.Probe(node, gpuhost.Options{LibDir: cfg.LibDir, DriversDir: cfg.DriversDir, Details: true})
	if err != nil {
		return cdiinstall.Host{}, err
	}
	// The spec offers every capability the host can serve: probe them all.
	stack, err := stackprobe.For(stackOptions(cfg), vendorstack.FromInventory(h.Inventory.Adapters), capability.Video|capability.Display)
	if err != nil {
		return cdiinstall.Host{}, err
	}
	for _, m := range vendorstack.Missing(vendorstack.FromInventory(h.Inventory.Adapters), stack.ROCm) {
		fmt.Fprintf(os.Stderr, "wsl-gpu-hook: cdi generate: %s\n", m)
	}
	return cdiinstall.Host{Inventory: h.Inventory, Device: node, LibDir: cfg.LibDir, Stack: stack}, nil
}

func cdiKeepCommand() command {
	return command{name: "keep",
		summary: "Keep the hook and the CDI specs in a directory current until stopped.\nWhat Docker Desktop's agent container runs (install docker-desktop):\nthe hook is copied into --hook-dir, the specs name it; --remove takes away\nwhat it recorded writing.",
		define: func(fs *flag.FlagSet) runFunc {
			var f keepFlags
			fs.StringVar(&f.hookDir, "hook-dir", "", "`DIR` the hook and wsl-gpu-ctl are copied into; the specs name the hook there (required)")
			fs.StringVar(&f.dir, "dir", cdiinstall.SystemRunDir, "CDI spec `DIR` to keep current")
			fs.DurationVar(&f.interval, "interval", 30*time.Second, "look at the adapters again this often")
			fs.BoolVar(&f.once, "once", false, "set up once and exit: the exit status says whether it worked")
			fs.BoolVar(&f.remove, "remove", false, "remove what an earlier keep recorded writing, and exit")
			return func(ctx context.Context, e env, _ []string) error {
				if f.hookDir == "" || !filepath.IsAbs(f.hookDir) || !filepath.IsAbs(f.dir) {
					return cli.CmdUsagef("cdi keep", "--hook-dir and --dir take absolute paths")
				}
				if f.once && f.remove {
					return cli.CmdUsagef("cdi keep", "--once and --remove: use one")
				}
				if f.interval < time.Second {
					return cli.CmdUsagef("cdi keep", "--interval must be at least 1s")
				}
				return runKeep(ctx, f, e.stdout, e.stderr)
			}
		}}
}

type keepFlags struct {
	hookDir, dir string
	interval     time.Duration
	once, remove bool
}

// runKeep is `cdi keep`: package nodesetup's loop, with this container's
// / as the node's (the engine binds the hook dir and the spec dir in at
// the paths they have in the engine).
func runKeep(ctx context.Context, f keepFlags, stdout, stderr io.Writer) error {
	hook, err := hookPath()
	if err != nil {
		return fmt.Errorf("cdi keep: %w", err)
	}
	ctl, err := os.Executable()
	if err != nil {
		return fmt.Errorf("cdi keep: %w", err)
	}
	s := nodesetup.Setup{Root: "/", HookDir: f.hookDir, CDIDir: f.dir, Binaries: []string{hook, ctl}}
	switch {
	case f.remove:
		removed, err := s.Remove()
		for _, r := range removed {
			fmt.Fprintln(stdout, r)
		}
		if err != nil {
			return fmt.Errorf("cdi keep --remove: %w", err)
		}
		return nil
	case f.once:
		changed, err := s.Apply()
		for _, c := range changed {
			fmt.Fprintln(stdout, c)
		}
		if err != nil {
			return fmt.Errorf("cdi keep: %w", err)
		}
		fmt.Fprintf(stdout, "the CDI specs in %s are current\n", f.dir)
		return nil
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	log.Info("keeping the hook and the CDI specs current", "hook-dir", f.hookDir, "dir", f.dir, "interval", f.interval)
	s.Keep(ctx, f.interval, log)
	log.Info("stopping; the specs and the hook stay (uninstall removes them)")
	return nil
}
