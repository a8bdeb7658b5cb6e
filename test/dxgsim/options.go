package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/dxgsim/internal/dxg"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/simhost"
)

const defaultDev = "/dev/dxg"

// options is the parsed command line.
type options struct {
	dev      string // node on the host; "" with --bind-host alone
	report   string
	bindHost string
	faults   []string
	denied   bool // node mode 0600, CMD as 65534:65534
	cfg      dxg.Config
	cmd      []string
}

// faultNames lists the faults in the order help texts show them.
const faultNames = "old-kernel, query-fail=N, missing-folder=N, zero-adapters, denied, ntstatus, no-stats, no-stats-pid, stats-fail=N, stats-backwards"

type faultList []string

func (f *faultList) String() string     { return strings.Join(*f, ",") }
func (f *faultList) Set(s string) error { *f = append(*f, s); return nil }

func parseArgs(args []string, stderr io.Writer) (options, error) {
	var o options
	var profile string
	var faults, folders, luids faultList
	fs := flag.NewFlagSet("dxgsim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&profile, "profile", "", "simulated host `NAME` (one of "+strings.Join(simhost.Names(), ", ")+")")
	fs.StringVar(&o.dev, "dev", "", "create the simulated node at `PATH` (required without --bind-host; with it, an extra node on the host)")
	fs.Var(&faults, "fault", "inject fault `F`, repeatable: "+faultNames)
	fs.StringVar(&o.report, "report", "", "write a JSON summary to `FILE` on exit")
	fs.Var(&folders, "folder", "report adapter N's driver store folder as `N=NAME`, as after a driver update, repeatable")
	fs.Var(&luids, "luid", "report adapter N's LUID as `N=0xHEX`, as after Windows restarted the adapter, repeatable")
	fs.DurationVar(&o.cfg.HostLatency, "host-latency", 0, "delay each call the driver sends to the Windows host (QUERYADAPTERINFO, and a process's first call: its open's process object) by `D`, as the VM bus does; 0 answers at once (hack/benchstart passes WSL's figure)")
	fs.StringVar(&o.cfg.RemovedFile, "removed-file", "", "re-read `FILE` (one adapter index a line) at every enumeration: those adapters are gone, as when Windows removes one while running")
	fs.StringVar(&o.cfg.LUIDFile, "luid-file", "", "re-read `FILE` (lines N=0xHEX, as --luid) at every enumeration: new LUIDs while running, as after a WSL reboot")
	fs.StringVar(&o.cfg.FolderFile, "folder-file", "", "re-read `FILE` (lines N=NAME, as --folder) at every driver store path query: a driver update while running")
	fs.StringVar(&o.bindHost, "bind-host", "", "show the simulated host tree `DIR` at /usr/lib/wsl and the node at /dev/dxg, in a private mount namespace")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: dxgsim --profile NAME [--dev PATH] [--fault F]... [--report FILE] [--bind-host DIR] -- CMD ARGS...")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	o.cmd = fs.Args()
	var problems []error
	if len(o.cmd) == 0 {
		problems = append(problems, errors.New("no command: put it after --"))
	}
	if profile == "" {
		problems = append(problems, fmt.Errorf("--profile is required (one of %s)", strings.Join(simhost.Names(), ", ")))
	} else if p, err := simhost.Lookup(profile); err != nil {
		problems = append(problems, err)
	} else {
		o.cfg.Profile = p
	}
	if o.bindHost == "" && o.dev == "" {
		problems = append(problems, errors.New("--dev PATH is required without --bind-host"))
	}
	if o.bindHost != "" && o.dev == defaultDev {
		o.dev = "" // the node appears there inside the namespace anyway
	}
	if o.bindHost != "" {
		abs, err := filepath.Abs(o.bindHost)
		if err != nil {
			problems = append(problems, fmt.Errorf("--bind-host %s: %w", o.bindHost, err))
		}
		o.bindHost = abs
	}
	for _, f := range folders {
		if err := o.setFolder(f); err != nil {
			problems = append(problems, err)
		}
	}
	for _, l := range luids {
		if err := o.setLUID(l); err != nil {
			problems = append(problems, err)
		}
	}
	for _, f := range faults {
		if err := o.addFault(f); err != nil {
			problems = append(problems, err)
		}
	}
	o.faults = faults
	if o.cfg.Profile.Name != "" {
		if err := o.cfg.Validate(); err != nil {
			problems = append(problems, err)
		}
	}
	return o, errors.Join(problems...)
}

func (o *options) addFault(f string) error {
	name, arg, hasArg := strings.Cut(f, "=")
	flagFault := map[string]*bool{
		"old-kernel":      &o.cfg.OldKernel,
		"zero-adapters":   &o.cfg.ZeroAdapters,
		"ntstatus":        &o.cfg.NTStatus,
		"denied":          &o.denied,
		"no-stats":        &o.cfg.NoStats,
		"no-stats-pid":    &o.cfg.NoStatsPID,
		"stats-backwards": &o.cfg.StatsBackwards,
	}
	if b, ok := flagFault[name]; ok {
		if hasArg {
			return fmt.Errorf("fault %q takes no value: use --fault %s", f, name)
		}
		*b = true
		return nil
	}
	var list *[]int
	switch name {
	case "query-fail":
		list = &o.cfg.QueryFail
	case "missing-folder":
		list = &o.cfg.MissingFolder
	case "stats-fail":
		list = &o.cfg.StatsFail
	default:
		return fmt.Errorf("unknown fault %q (known: %s)", f, faultNames)
	}
	n, err := strconv.Atoi(arg)
	if !hasArg || err != nil || n < 0 {
		return fmt.Errorf("fault %q needs an adapter index: --fault %s=N with N >= 0", f, name)
	}
	*list = append(*list, n)
	return nil
}

// setFolder makes adapter N report folder NAME (a Windows driver update
// renames the folder: the hash after inf_amd64_ changes). The profile's
// adapters are copied first: profiles are shared data.
// setLUID makes adapter N report LUID L (N=0xL).
func (o *options) setLUID(f string) error {
	n, hex, ok := strings.Cut(f, "=")
	i, err := strconv.Atoi(n)
	if !ok || err != nil {
		return fmt.Errorf("--luid %q: want N=0xHEX", f)
	}
	l, err := strconv.ParseUint(strings.TrimPrefix(hex, "0x"), 16, 64)
	if err != nil || l == 0 {
		return fmt.Errorf("--luid %q: want N=0xHEX, a nonzero LUID", f)
	}
	if i < 0 || i >= len(o.cfg.Profile.Adapters) {
		return fmt.Errorf("--luid %q: profile %s has %d adapters", f, o.cfg.Profile.Name, len(o.cfg.Profile.Adapters))
	}
	o.cfg.Profile.Adapters = append([]simhost.Adapter(nil), o.cfg.Profile.Adapters...)
	o.cfg.Profile.Adapters[i].LUIDLow, o.cfg.Profile.Adapters[i].LUIDHigh = uint32(l), uint32(l>>32)
	return nil
}

func (o *options) setFolder(f string) error {
	n, name, ok := strings.Cut(f, "=")
	i, err := strconv.Atoi(n)
	if !ok || err != nil || name == "" || strings.ContainsAny(name, `/\`) {
		return fmt.Errorf("--folder %q: want N=NAME, a folder name without slashes", f)
	}
	if i < 0 || i >= len(o.cfg.Profile.Adapters) {
		return fmt.Errorf("--folder %q: profile %s has %d adapters", f, o.cfg.Profile.Name, len(o.cfg.Profile.Adapters))
	}
	o.cfg.Profile.Adapters = append([]simhost.Adapter(nil), o.cfg.Profile.Adapters...)
	a := &o.cfg.Profile.Adapters[i]
	dir := a.DriverStorePath[:strings.LastIndexAny(a.DriverStorePath, `\`)+1]
	a.DriverStorePath, a.Folder = dir+name, name
	return nil
}
