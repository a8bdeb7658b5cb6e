package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/config"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/install"
)

// cdiUnit is where install cdi puts the refresh unit.
const cdiUnit = "/etc/systemd/system/wsl-gpu-hook-cdi.service"

func runInstall(cfg config.Config, args []string, stdout io.Writer, uninstall bool) error {
	verb := "install"
	if uninstall {
		verb = "uninstall"
	}
	fs := flag.NewFlagSet(verb, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	dryRun := fs.Bool("dry-run", false, "print what would change, change nothing")
	prefix := fs.String("prefix", "", "prepend to every system path (for packaging and tests)")
	hook := fs.String("hook", "", "the installed wsl-gpu-hook binary (default: this one)")
	if err := fs.Parse(args); err != nil {
		return usageError{verb + ": " + err.Error()}
	}
	engines := fs.Args()
	if len(engines) == 0 {
		return usageError{verb + ": name an engine: docker, podman, containerd or cdi"}
	}
	o := install.DefaultOptions()
	o.Prefix = *prefix
	if *hook == "" {
		self, err := os.Executable()
		if err != nil {
			return err
		}
		if self, err = filepath.EvalSymlinks(self); err != nil {
			return err
		}
		*hook = self
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
			p, err = cdiPlan(cfg, o, uninstall)
		default:
			return usageError{fmt.Sprintf("%s: unknown engine %q (docker, podman, containerd, cdi)", verb, engine)}
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

// cdiPlan writes the CDI spec for this host and the unit that refreshes it
// at every boot (a Windows driver update renames the driver store folder).
func cdiPlan(cfg config.Config, o install.Options, uninstall bool) (*install.Plan, error) {
	p := &install.Plan{Next: "enable the refresh at boot: systemctl enable wsl-gpu-hook-cdi; then run with --device " + "wsl-gpu-hook.dev/gpu=all"}
	unit := strings.ReplaceAll(config.CDIRefreshUnit, "/usr/local/bin/wsl-gpu-hook", o.HookPath)
	for _, f := range []struct {
		path string
		data func() ([]byte, error)
	}{
		{defaultCDIPath, func() ([]byte, error) {
			spec, err := generateCDI(cfg)
			if err != nil {
				return nil, err
			}
			data, err := json.MarshalIndent(spec, "", "  ")
			return append(data, '\n'), err
		}},
		{cdiUnit, func() ([]byte, error) { return []byte(unit), nil }},
	} {
		old, err := os.ReadFile(filepath.Join(o.Prefix, f.path))
		if err != nil && !os.IsNotExist(err) {
			return nil, err
		}
		if err != nil {
			old = nil
		}
		if uninstall {
			if old != nil {
				p.Changes = append(p.Changes, install.Change{Path: f.path, Old: old})
			}
			continue
		}
		data, err := f.data()
		if err != nil {
			return nil, err
		}
		if string(old) != string(data) {
			p.Changes = append(p.Changes, install.Change{Path: f.path, Old: old, New: data})
		}
	}
	if uninstall {
		p.Next = "disable the refresh: systemctl disable wsl-gpu-hook-cdi"
	}
	return p, nil
}
