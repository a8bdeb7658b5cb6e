package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/config"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/setup/cdiinstall"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/setup/cdispec"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/setup/desktop"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/setup/install"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/cli"
)

// engines are what install and uninstall take, with what each changes.
var engineWords = []word{
	{"docker", "the nvidia-container-runtime-hook and wsl-gpu-runtime links, the runtime wsl-gpu in daemon.json"},
	{"podman", "the hooks.d file (podman, CRI-O): containers with the request annotation get GPUs"},
	{"containerd", "the runtime handler wsl-gpu in config.toml, for Kubernetes RuntimeClasses"},
	{"cdi", "the CDI specs and the unit that refreshes them at boot (--user: this user's)"},
	{"docker-desktop", "Docker Desktop's engine, through the docker CLI: a restart-always container keeps the CDI specs and the hook on its data disk"},
}

func installCommand(uninstall bool) command {
	c := command{name: "install", args: "ENGINE...", words: engineWords,
		summary: "Configure engines to run the hook.\n--dry-run prints the changes; files another tool owns are left alone."}
	if uninstall {
		c.name, c.summary = "uninstall", "Undo install for the named engines.\nEvery other byte of their configuration stays as it was."
	}
	c.define = func(fs *flag.FlagSet) runFunc {
		var f installFlags
		fs.BoolVar(&f.dryRun, "dry-run", false, "print what would change, change nothing")
		fs.StringVar(&f.prefix, "prefix", "", "prepend `DIR` to every system path (for packaging and tests)")
		fs.StringVar(&f.hook, "hook", "", "the installed wsl-gpu-hook `PATH` (default: the one next to this binary)")
		fs.BoolVar(&f.cdi.user, "user", false, "cdi: write the specs and a systemd --user unit for this user's rootless engines ($XDG_CONFIG_HOME/cdi)")
		fs.StringVar(&f.cdi.nvidia, "nvidia-kind", "", "cdi: the `CHOICE` when another spec defines nvidia.com/gpu: ours (move it aside) or skip (write only our kind)")
		fs.StringVar(&f.cdi.amd, "amd-kind", "", "cdi: the `CHOICE` when another spec defines amd.com/gpu: ours or skip")
		fs.StringVar(&f.desktop.image, "image", defaultImage(), "docker-desktop: the project's `IMAGE`, loaded into Docker Desktop's engine")
		fs.StringVar(&f.desktop.cdiDir, "cdi-dir", "", "docker-desktop: the engine's CDI spec `DIR` to write (default: its /var/run/cdi)")
		return func(ctx context.Context, e env, engines []string) error {
			return runInstall(ctx, e.cfg, f, engines, e.stdout, uninstall)
		}
	}
	return c
}

// installFlags are install's and uninstall's flags.
type installFlags struct {
	dryRun       bool
	prefix, hook string
	cdi          cdiFlags
	desktop      struct{ image, cdiDir string }
}

// defaultImage is the image `make image` tags and the release ships for
// this version.
func defaultImage() string { return "localhost/wsl-gpu-hook:" + version }

func runInstall(ctx context.Context, cfg config.Config, f installFlags, engines []string, stdout io.Writer, uninstall bool) error {
	verb := "install"
	if uninstall {
		verb = "uninstall"
	}
	if len(engines) == 0 {
		return cli.CmdUsagef(verb, "name an engine: docker, podman, containerd, cdi or docker-desktop")
	}
	// Every name is checked before any engine is changed.
	for _, engine := range engines {
		if !slices.ContainsFunc(engineWords, func(w word) bool { return w.name == engine }) {
			return cli.CmdUsagef(verb, "unknown engine %q (docker, podman, containerd, cdi, docker-desktop)", engine)
		}
	}
	// Docker Desktop's engine is reached through the docker CLI only:
	// nothing of this distro's configuration changes.
	if i := slices.Index(engines, "docker-desktop"); i >= 0 {
		if len(engines) > 1 {
			return cli.CmdUsagef(verb, "docker-desktop goes alone: it changes nothing in this distro")
		}
		s := desktop.Setup{Docker: dockerCLI, Image: f.desktop.image, CDIDir: f.desktop.cdiDir, Out: stdout, DryRun: f.dryRun}
		if uninstall {
			return s.Uninstall(ctx)
		}
		return s.Install(ctx)
	}
	if err := f.cdi.readKinds(verb); err != nil {
		return err
	}
	o := install.DefaultOptions()
	o.Prefix = f.prefix
	hook := f.hook
	if hook == "" {
		var err error
		if hook, err = hookPath(); err != nil {
			return fmt.Errorf("%s: %w", verb, err)
		}
	}
	o.HookPath, o.BinDir = hook, filepath.Dir(hook)
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
			p, err = cdiPlan(cfg, o, f.cdi, uninstall, stdout)
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
			if f.dryRun {
				fmt.Fprint(stdout, install.Diff(c))
			} else {
				fmt.Fprintf(stdout, "%s: %s\n", engine, c)
			}
		}
		if f.dryRun {
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
// them, both from the same options (pkg/setup/cdiinstall). A vendor kind another
// producer defines stops the plan until --nvidia-kind / --amd-kind says
// what to do; the choices are printed.
func cdiPlan(cfg config.Config, o install.Options, c cdiFlags, uninstall bool, stdout io.Writer) (*install.Plan, error) {
	configPath := specConfigPath(cfg)
	co := cdiinstall.System(o.HookPath, configPath)
	if c.user || os.Geteuid() != 0 {
		co = cdiinstall.User(o.HookPath, configPath, os.Getenv("HOME"), os.Getenv("XDG_CONFIG_HOME"), os.Getenv("XDG_RUNTIME_DIR"))
	}
	co.Prefix = o.Prefix
	maps.Copy(co.Kinds, c.kinds)
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
	kinds       map[string]cdiinstall.Choice // nvidia and amd read
}

// readKinds reads --nvidia-kind and --amd-kind into c.kinds.
func (c *cdiFlags) readKinds(verb string) error {
	c.kinds = map[string]cdiinstall.Choice{}
	for kind, v := range map[string]string{cdispec.NVIDIAKind: c.nvidia, cdispec.AMDKind: c.amd} {
		if v == "" {
			continue
		}
		choice, err := cdiinstall.ParseChoice(v)
		if err != nil {
			return cli.CmdUsagef(verb, "--%s-kind %v", strings.SplitN(kind, ".", 2)[0], err)
		}
		c.kinds[kind] = choice
	}
	return nil
}

// dockerCLI runs the docker CLI on PATH for install docker-desktop: its
// standard output, and its first line of standard error as the error.
// Each call starts at most one short container (the agent's --once), so
// two minutes bound a wedged engine without cutting a slow start.
func dockerCLI(ctx context.Context, args ...string) (string, error) {
	out, err := engineCLI(ctx, 2*time.Minute, "docker", args...)
	return string(out), err
}
