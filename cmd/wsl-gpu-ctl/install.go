package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/config"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/cdiinstall"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/cdispec"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/cli"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/install"
)

func runInstall(cfg config.Config, args []string, stdout io.Writer, uninstall bool) error {
	verb := "install"
	if uninstall {
		verb = "uninstall"
	}
	fs := flag.NewFlagSet(verb, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	dryRun := fs.Bool("dry-run", false, "print what would change, change nothing")
	prefix := fs.String("prefix", "", "prepend to every system path (for packaging and tests)")
	hook := fs.String("hook", "", "the installed wsl-gpu-hook binary (default: the one next to this binary)")
	var cdiOpts cdiFlags
	fs.BoolVar(&cdiOpts.user, "user", false, "cdi: write the specs and a systemd --user unit for this user's rootless engines ($XDG_CONFIG_HOME/cdi)")
	fs.StringVar(&cdiOpts.nvidia, "nvidia-kind", "", "cdi: when another spec defines nvidia.com/gpu: ours (move it aside) or skip (write only our kind)")
	fs.StringVar(&cdiOpts.amd, "amd-kind", "", "cdi: when another spec defines amd.com/gpu: ours or skip")
	// Flags may follow the engines too (`install cdi --nvidia-kind=ours`,
	// as the conflict message suggests).
	var engines []string
	for {
		if err := fs.Parse(args); err != nil {
			return cli.UsageError{Msg: verb + ": " + err.Error()}
		}
		if fs.NArg() == 0 {
			break
		}
		engines, args = append(engines, fs.Arg(0)), fs.Args()[1:]
	}
	if len(engines) == 0 {
		return cli.UsageError{Msg: verb + ": name an engine: docker, podman, containerd or cdi"}
	}
	o := install.DefaultOptions()
	o.Prefix = *prefix
	if *hook == "" {
		var err error
		if *hook, err = hookPath(); err != nil {
			return fmt.Errorf("%s: %w", verb, err)
		}
	}
	o.HookPath, o.BinDir = *hook, filepath.Dir(*hook)
	o.Annotation = cfg.RequestAnnotation
	if o.Prefix == "" {
		// Files a package installed stay the package manager's.
		o.Owner = install.DpkgOwner
	}

	for _, engine := range engines {
		var p *install.Plan
		var err error
		switch engine {
		case "docker":
			p, err = install.Docker(o, uninstall)
		case "podman":
			p, err = install.Podman(o, uninstall)
		case "containerd":
			p, err = install.Containerd(o, uninstall)
		case "cdi":
			p, err = cdiPlan(cfg, o, cdiOpts, uninstall, stdout)
		default:
			return cli.UsageError{Msg: fmt.Sprintf("%s: unknown engine %q (docker, podman, containerd, cdi)", verb, engine)}
		}
		if err != nil {
			return fmt.Errorf("%s %s: %w", verb, engine, err)
		}
		for _, w := range p.Warnings {
			fmt.Fprintf(stdout, "%s: warning: %s\n", engine, w)
		}
		if len(p.Changes) == 0 {
			fmt.Fprintf(stdout, "%s: nothing to change\n", engine)
			continue
		}
		for _, c := range p.Changes {
			if *dryRun {
				fmt.Fprint(stdout, install.Diff(c))
			} else {
				fmt.Fprintf(stdout, "%s: %s\n", engine, c)
			}
		}
		if *dryRun {
			continue
		}
		if err := install.Apply(o, p); err != nil {
			return fmt.Errorf("%s %s: %w", verb, engine, err)
		}
		fmt.Fprintf(stdout, "%s: %s\n", engine, p.Next)
	}
	return nil
}

// specConfigPath is the config path the CDI specs' hooks name: none for
// the default file, which the hook reads anyway. `install cdi` and `cdi
// generate` (the boot unit) both use it, so the unit rewrites nothing
// install wrote.
func specConfigPath(cfg config.Config) string {
	if p := cfg.Path(); p != config.DefaultPath {
		return p
	}
	return ""
}

// cdiPlan plans the CDI specs for this host and the unit that refreshes
// them, both from the same options (pkg/cdiinstall). A vendor kind another
// producer defines stops the plan until --nvidia-kind / --amd-kind says
// what to do; the choices are printed.
func cdiPlan(cfg config.Config, o install.Options, c cdiFlags, uninstall bool, stdout io.Writer) (*install.Plan, error) {
	configPath := specConfigPath(cfg)
	co := cdiinstall.System(o.HookPath, configPath)
	if c.user || os.Geteuid() != 0 {
		co = cdiinstall.User(o.HookPath, configPath, os.Getenv("HOME"), os.Getenv("XDG_CONFIG_HOME"), os.Getenv("XDG_RUNTIME_DIR"))
	}
	co.Prefix = o.Prefix
	for kind, v := range map[string]string{cdispec.NVIDIAKind: c.nvidia, cdispec.AMDKind: c.amd} {
		if v == "" {
			continue
		}
		choice, err := cdiinstall.ParseChoice(v)
		if err != nil {
			return nil, cli.UsageError{Msg: fmt.Sprintf("install cdi: --%s-kind %v", strings.SplitN(kind, ".", 2)[0], err)}
		}
		co.Kinds[kind] = choice
	}
	var host cdiinstall.Host
	if !uninstall {
		var err error
		if host, err = cdiHost(cfg); err != nil {
			return nil, err
		}
	}
	p, err := cdiinstall.Plan(co, host, uninstall)
	var conflict *cdiinstall.ConflictError
	if errors.As(err, &conflict) {
		fmt.Fprint(stdout, conflict.Explain())
	}
	return p, err
}

// cdiFlags are install's flags that only `install cdi` reads.
type cdiFlags struct {
	user        bool
	nvidia, amd string
}
