package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	cdi "tags.cncf.io/container-device-interface/specs-go"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/config"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/atomicfile"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/capability"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/cdiinstall"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/cdispec"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/cli"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/devnode"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/gpuhost"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/vendorstack"
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
	stack, err := vendorstack.ProbeFor(stackOptions(cfg), vendorstack.FromInventory(h.Inventory.Adapters), capability.Video|capability.Display)
	if err != nil {
		return cdiinstall.Host{}, err
	}
	for _, m := range vendorstack.Missing(vendorstack.FromInventory(h.Inventory.Adapters), stack.ROCm) {
		fmt.Fprintf(os.Stderr, "wsl-gpu-hook: cdi generate: %s\n", m)
	}
	return cdiinstall.Host{Inventory: h.Inventory, Device: node, LibDir: cfg.LibDir, Stack: stack}, nil
}
