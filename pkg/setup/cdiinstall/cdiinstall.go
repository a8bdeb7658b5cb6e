package cdiinstall

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"
	cdi "tags.cncf.io/container-device-interface/specs-go"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/devnode"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/driverstore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/setup/cdispec"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/setup/install"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/atomicfile"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/vendorstack"
)

// Choice is what to do with a vendor kind another producer also defines.
type Choice string

// Choices for a vendor kind.
const (
	// Ask: plan nothing while another producer defines the kind; say what
	// each choice means.
	Ask Choice = ""
	// Ours moves the other producer's spec file aside (kept as
	// FILE.wsl-gpu-hook.bak, which engines do not read) and writes ours.
	Ours Choice = "ours"
	// Skip writes no spec for the kind: the other producer keeps it, and
	// our devices stay reachable under wsl-gpu-hook.dev/gpu.
	Skip Choice = "skip"
)

// ParseChoice reads a --nvidia-kind / --amd-kind value.
func ParseChoice(s string) (Choice, error) {
	switch c := Choice(s); c {
	case Ours, Skip:
		return c, nil
	}
	return Ask, fmt.Errorf("%q: want ours or skip", s)
}

// Paths of a system-wide install.
const (
	SystemSpecDir  = "/etc/cdi"
	SystemRunDir   = "/var/run/cdi"
	SystemUnitPath = "/etc/systemd/system/" + UnitName
	// UnitName is the refresh unit, system or user.
	UnitName = "wsl-gpu-hook-cdi.service"
	// LegacySpec is where versions before the vendor kinds wrote the
	// spec; install removes it (it would define our devices twice).
	LegacySpec = "/etc/cdi/wsl-gpu-hook.json"
)

// Options is everything the specs and the unit are made from.
type Options struct {
	// Prefix is prepended to every path when reading and writing (tests).
	Prefix string
	// HookPath is the installed binary: the spec's hook and the unit's
	// ExecStart run it.
	HookPath string
	// ConfigPath is the hook's configuration file; "" for the default,
	// which is then named nowhere.
	ConfigPath string
	// SpecDir receives the specs; ReadDirs are the dirs engines read, in
	// the CDI library's priority order (later wins), SpecDir among them.
	SpecDir  string
	ReadDirs []string
	// UnitPath is where the refresh unit goes; User makes it a
	// `systemctl --user` unit.
	UnitPath string
	User     bool
	// Kinds holds the choice per vendor kind ("nvidia.com/gpu": Skip).
	Kinds map[string]Choice
}

// System is an install for root engines.
func System(hookPath, configPath string) Options {
	return Options{
		HookPath: hookPath, ConfigPath: configPath,
		SpecDir: SystemSpecDir, ReadDirs: []string{SystemSpecDir, SystemRunDir},
		UnitPath: SystemUnitPath, Kinds: map[string]Choice{},
	}
}

// User is an install for one user's rootless engines, which read
// $XDG_CONFIG_HOME/cdi and $XDG_RUNTIME_DIR/cdi (rootless Docker,
// nerdctl; podman reads /etc/cdi and its cdi_spec_dirs). The spec goes
// to the config dir, which outlives a logout; the unit is a user unit.
func User(hookPath, configPath, home, xdgConfig, xdgRuntime string) Options {
	if xdgConfig == "" {
		xdgConfig = filepath.Join(home, ".config")
	}
	o := Options{
		HookPath: hookPath, ConfigPath: configPath,
		SpecDir:  filepath.Join(xdgConfig, "cdi"),
		UnitPath: filepath.Join(xdgConfig, "systemd/user", UnitName),
		User:     true, Kinds: map[string]Choice{},
	}
	o.ReadDirs = []string{o.SpecDir}
	if xdgRuntime != "" {
		o.ReadDirs = append(o.ReadDirs, filepath.Join(xdgRuntime, "cdi"))
	}
	return o
}

// HookArgs is the argv the spec's hook runs before cdispec.HookCommand.
func (o Options) HookArgs() []string {
	args := []string{"wsl-gpu-hook"}
	if o.ConfigPath != "" {
		args = append(args, "--config", o.ConfigPath)
	}
	return args
}

// skipped lists the kinds not to write.
func (o Options) skipped() []string {
	var out []string
	for k, c := range o.Kinds {
		if c == Skip {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// GenerateArgs is the command line, after the binary, that regenerates the
// specs exactly as Plan writes them: the unit's ExecStart.
func (o Options) GenerateArgs() []string {
	args := o.HookArgs()[1:]
	args = append(args, "cdi", "generate", "--dir", o.SpecDir, "--hook", o.HookPath)
	for _, k := range o.skipped() {
		args = append(args, "--skip-kind", k)
	}
	return args
}

// SpecOptions is what cdispec.Generate gets.
func (o Options) SpecOptions(dev devnode.Node, libDir string) cdispec.Options {
	return cdispec.Options{Device: dev, LibDir: libDir, HookPath: o.HookPath, HookArgs: o.HookArgs(), SkipKinds: o.skipped()}
}

func (o Options) path(p string) string { return filepath.Join(o.Prefix, p) }

// Files are the spec files for a host, by path in o.SpecDir.
func Files(o Options, specs []*cdi.Spec) (map[string][]byte, error) {
	out := map[string][]byte{}
	for _, s := range specs {
		data, err := cdispec.Marshal(s)
		if err != nil {
			return nil, err
		}
		out[path.Join(o.SpecDir, cdispec.FileName(s.Kind))] = data
	}
	return out, nil
}

// Conflict is a device name of ours that another spec file also defines.
type Conflict struct {
	Kind   string
	Device string // qualified, "nvidia.com/gpu=all"
	Other  string // the other producer's file (system path)
	// Shadowed: the other file is in a dir engines rank higher, so it wins
	// silently; otherwise engines refuse the name altogether.
	Shadowed bool
}

// ConflictError is returned when a device name of ours is defined by
// another producer and no choice was made: nothing is planned or written.
type ConflictError struct {
	Conflicts []Conflict
	// Generate marks the error of `cdi generate` (Sync), whose way out is
	// --skip-kind or removing the other file, not install's choices.
	Generate bool
}

func (e *ConflictError) Error() string {
	var kinds, others, devs []string
	for _, c := range e.Conflicts {
		if !slices.Contains(kinds, c.Kind) {
			kinds = append(kinds, c.Kind)
		}
		if !slices.Contains(others, c.Other) {
			others = append(others, c.Other)
		}
		devs = append(devs, c.Device)
	}
	msg := fmt.Sprintf("%s already defined by %s (%s): nothing changed: ",
		strings.Join(kinds, ", "), strings.Join(others, ", "), strings.Join(devs, " "))
	if !e.Generate {
		var flags []string
		for _, k := range kinds {
			flags = append(flags, "--"+flagName(k)+"=ours|skip")
		}
		return msg + "choose " + strings.Join(flags, " ") + " (see above)"
	}
	// Our own kind cannot be skipped: the other file has to go.
	what := "remove that file"
	if len(others) > 1 {
		what = "remove those files"
	}
	if slices.Contains(kinds, cdispec.NVIDIAKind) {
		what += " (NVIDIA's refresh service writes it again: " + nvidiaRefreshOff + ")"
	}
	var skips, choices []string
	for _, k := range kinds {
		if isVendorKind(k) {
			skips = append(skips, "--skip-kind "+k)
			choices = append(choices, "--"+flagName(k)+"=skip")
		}
	}
	if len(skips) > 0 {
		what += fmt.Sprintf(", or leave the kind to it with %s (for the boot unit: wsl-gpu-hook install %s cdi)",
			strings.Join(skips, " "), strings.Join(choices, " "))
	}
	return msg + what
}

// nvidiaRefreshOff stops NVIDIA's toolkit from writing its spec again.
const nvidiaRefreshOff = "systemctl disable --now nvidia-cdi-refresh.path nvidia-cdi-refresh.service"

// Explain says, for a person, what each choice means.
func (e *ConflictError) Explain() string {
	var b strings.Builder
	byKind := map[string][]Conflict{}
	var kinds []string
	for _, c := range e.Conflicts {
		if _, ok := byKind[c.Kind]; !ok {
			kinds = append(kinds, c.Kind)
		}
		byKind[c.Kind] = append(byKind[c.Kind], c)
	}
	for _, k := range kinds {
		cs := byKind[k]
		var others, devs []string
		for _, c := range cs {
			if !slices.Contains(others, c.Other) {
				others = append(others, c.Other)
			}
			devs = append(devs, c.Device)
		}
		how := "engines refuse these names while two specs in one directory define them"
		if cs[0].Shadowed {
			how = "that file is in a directory engines rank higher, so it would win and ours would never be used"
		}
		fmt.Fprintf(&b, "%s is already defined by %s (%s): %s.\n", k, strings.Join(others, ", "), strings.Join(devs, " "), how)
		fmt.Fprintf(&b, "  --%s=ours  move %s aside (kept as *%s, which engines do not read) and write ours:\n", flagName(k), strings.Join(others, ", "), ".wsl-gpu-hook.bak")
		fmt.Fprintf(&b, "             --gpus and --device %s=... then get the folders of the current driver at every start.\n", k)
		fmt.Fprintf(&b, "             If NVIDIA's nvidia-cdi-refresh service writes it again at boot, disable it:\n")
		fmt.Fprintf(&b, "             %s\n", nvidiaRefreshOff)
		fmt.Fprintf(&b, "  --%s=skip  leave %s to the other producer and write only wsl-gpu-hook.dev/gpu\n", flagName(k), k)
		fmt.Fprintf(&b, "             (use --device wsl-gpu-hook.dev/gpu=all; --gpus keeps using the other spec).\n")
	}
	return b.String()
}

func flagName(kind string) string {
	vendor, _, _ := strings.Cut(kind, ".")
	return vendor + "-kind"
}

// detect loads o.ReadDirs as engines do, with files (path -> content; nil
// removes) in place of what is there, and reports every device of want
// (qualified names) that does not resolve to the file of ours that defines
// it.
func detect(o Options, files map[string][]byte, want map[string]string) ([]Conflict, error) {
	tmp, err := os.MkdirTemp("", "wsl-gpu-hook-cdi-check-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	// real maps a copied file back to its system path.
	real := map[string]string{}
	var dirs []string
	for i, dir := range o.ReadDirs {
		copyDir := filepath.Join(tmp, fmt.Sprint(i))
		if err := os.Mkdir(copyDir, 0o700); err != nil {
			return nil, err
		}
		dirs = append(dirs, copyDir)
		entries, err := os.ReadDir(o.path(dir))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("read CDI dir %s: %w", dir, err)
		}
		names := map[string][]byte{}
		for _, e := range entries {
			if e.IsDir() {
				continue
			}
			data, err := os.ReadFile(filepath.Join(o.path(dir), e.Name()))
			if err != nil {
				continue // engines skip it too (a dangling link)
			}
			names[e.Name()] = data
		}
		for p, data := range files {
			if path.Dir(p) == path.Clean(dir) {
				names[path.Base(p)] = data
			}
		}
		for name, data := range names {
			if data == nil {
				continue
			}
			if err := os.WriteFile(filepath.Join(copyDir, name), data, 0o600); err != nil {
				return nil, err
			}
			real[filepath.Join(copyDir, name)] = path.Join(dir, name)
		}
	}
	cache, _ := cdiapi.NewCache(cdiapi.WithSpecDirs(dirs...), cdiapi.WithAutoRefresh(false))
	// A conflict within one priority removes the name from the cache and
	// records an error on both files.
	conflicting := map[string][]string{}
	for file, errs := range cache.GetErrors() {
		for _, err := range errs {
			for dev := range want {
				if strings.Contains(err.Error(), fmt.Sprintf("conflicting device %q", dev)) {
					conflicting[dev] = append(conflicting[dev], real[file])
				}
			}
		}
	}
	var out []Conflict
	devs := make([]string, 0, len(want))
	for d := range want {
		devs = append(devs, d)
	}
	sort.Strings(devs)
	for _, dev := range devs {
		ours := want[dev]
		kind, _, _ := strings.Cut(dev, "=")
		if files := conflicting[dev]; len(files) > 0 {
			sort.Strings(files)
			for _, f := range files {
				if f != ours {
					out = append(out, Conflict{Kind: kind, Device: dev, Other: f})
				}
			}
			continue
		}
		d := cache.GetDevice(dev)
		if d == nil {
			return nil, fmt.Errorf("CDI device %s from %s does not load: %v", dev, ours, cache.GetErrors())
		}
		if got := real[d.GetSpec().GetPath()]; got != ours {
			out = append(out, Conflict{Kind: kind, Device: dev, Other: got, Shadowed: true})
		}
	}
	return out, nil
}

// resolve is the one conflict check, of `install cdi` (Plan) and `cdi
// generate` (Sync), made before either changes anything. It returns the
// files o.SpecDir is to hold for specs (path -> content; nil for a file
// that goes: ours no longer generated, or another producer's moved aside
// by an Ours choice). It loads o.ReadDirs as engines do with those files
// in place; a device name of ours that another file also defines is
// settled by o.Kinds, or else is a ConflictError.
func resolve(o Options, specs []*cdi.Spec) (map[string][]byte, error) {
	files, err := Files(o, specs)
	if err != nil {
		return nil, err
	}
	ours, err := oursNow(o)
	if err != nil {
		return nil, err
	}
	// Our files that this run does not write any more (a kind now
	// skipped, the spec name of older versions) go.
	for _, f := range ours {
		if _, ok := files[f]; !ok {
			files[f] = nil
		}
	}
	want := map[string]string{}
	for _, s := range specs {
		for _, d := range s.Devices {
			want[s.Kind+"="+d.Name] = path.Join(o.SpecDir, cdispec.FileName(s.Kind))
		}
	}
	conflicts, err := detect(o, files, want)
	if err != nil {
		return nil, err
	}
	var undecided []Conflict
	for _, c := range conflicts {
		switch o.Kinds[c.Kind] {
		case Ours:
			if _, ok := files[c.Other]; !ok {
				files[c.Other] = nil
			}
		default:
			undecided = append(undecided, c)
		}
	}
	if len(undecided) > 0 {
		return nil, &ConflictError{Conflicts: undecided}
	}
	// With the other files moved aside, ours must resolve.
	if again, err := detect(o, files, want); err != nil {
		return nil, err
	} else if len(again) > 0 {
		return nil, &ConflictError{Conflicts: again}
	}
	return files, nil
}

// Host is what Plan needs from the host.
type Host struct {
	Inventory *driverstore.Inventory
	Device    devnode.Node
	LibDir    string
	// Stack is what the vendor stacks and capabilities find on the host
	// (cdispec.Options.Stack).
	Stack vendorstack.Host
}

// Plan computes the changes for installing (or, with uninstall, removing)
// the CDI specs and their refresh unit.
func Plan(o Options, h Host, uninstall bool) (*install.Plan, error) {
	p := &planner{&install.Plan{}}
	unit := []byte(Unit(o))
	ours, err := oursNow(o)
	if err != nil {
		return nil, err
	}
	if uninstall {
		// Only what this binary's install wrote: a spec under our name,
		// or the unit, of a wsl-gpu-hook installed elsewhere (the
		// package's beside a tarball's) still works, and stays.
		for _, f := range ours {
			data, err := readOptional(o.path(f))
			if err != nil {
				return nil, err
			}
			if other := otherHook(data, o.HookPath); other != "" {
				p.Warnings = append(p.Warnings, fmt.Sprintf("%s runs another wsl-gpu-hook (%s) and stays: uninstall cdi with that one, or remove the file", f, other))
				continue
			}
			if err := p.remove(o, f); err != nil {
				return nil, err
			}
		}
		data, err := readOptional(o.path(o.UnitPath))
		if err != nil {
			return nil, err
		}
		if other := unitRuns(data, o.HookPath); other != "" {
			p.Warnings = append(p.Warnings, fmt.Sprintf("%s runs another wsl-gpu-hook (%s) and stays: uninstall cdi with that one, or disable and remove the unit", o.UnitPath, other))
		} else if err := p.remove(o, o.UnitPath); err != nil {
			return nil, err
		}
		p.Next = "disable the refresh: " + systemctl(o) + " disable " + UnitName
		return p.Plan, nil
	}

	so := o.SpecOptions(h.Device, h.LibDir)
	so.Stack = h.Stack
	specs, err := cdispec.Generate(h.Inventory, so)
	if err != nil {
		return nil, err
	}
	files, err := resolve(o, specs)
	if err != nil {
		return nil, err
	}

	for _, f := range slices.Sorted(maps.Keys(files)) {
		if files[f] == nil {
			if err := p.remove(o, f); err != nil {
				return nil, err
			}
			continue
		}
		if err := p.write(o, f, files[f]); err != nil {
			return nil, err
		}
	}
	if err := p.write(o, o.UnitPath, unit); err != nil {
		return nil, err
	}
	var kinds []string
	for _, s := range specs {
		kinds = append(kinds, s.Kind+"=all")
	}
	p.Next = fmt.Sprintf("enable the refresh at boot: %s enable %s; then run with --device %s",
		systemctl(o), UnitName, strings.Join(kinds, " or --device "))
	return p.Plan, nil
}

// planner collects changes, reading the current content under o.Prefix.
type planner struct{ *install.Plan }

func (p *planner) write(o Options, f string, data []byte) error {
	old, err := readOptional(o.path(f))
	if err != nil {
		return err
	}
	if old == nil || !bytes.Equal(old, data) {
		p.Changes = append(p.Changes, install.Change{Path: f, Old: old, New: data})
	}
	return nil
}

func (p *planner) remove(o Options, f string) error {
	old, err := readOptional(o.path(f))
	if err != nil {
		return err
	}
	if old != nil {
		p.Changes = append(p.Changes, install.Change{Path: f, Old: old})
	}
	return nil
}

func readOptional(p string) ([]byte, error) {
	data, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if data == nil {
		data = []byte{}
	}
	return data, nil
}

// otherHook is what a spec file's hooks run when that is not (only) hook:
// "" when every hook runs hook, the first other path otherwise, and
// "(no hook)" for a file that is no spec or runs none.
func otherHook(data []byte, hook string) string {
	var spec cdi.Spec
	if err := json.Unmarshal(data, &spec); err != nil {
		return "(no hook)"
	}
	edits := []cdi.ContainerEdits{spec.ContainerEdits}
	for _, d := range spec.Devices {
		edits = append(edits, d.ContainerEdits)
	}
	n := 0
	for _, e := range edits {
		for _, h := range e.Hooks {
			if h == nil {
				continue
			}
			if h.Path != hook {
				return h.Path
			}
			n++
		}
	}
	if n == 0 {
		return "(no hook)"
	}
	return ""
}

// unitRuns is what a unit file's ExecStart runs when that is not hook as
// Unit writes it: "" for no file or hook, the ExecStart's first word
// otherwise.
func unitRuns(unit []byte, hook string) string {
	for _, line := range strings.Split(string(unit), "\n") {
		if rest, ok := strings.CutPrefix(line, "ExecStart="); ok {
			if strings.HasPrefix(rest, quote(hook)+" ") {
				return ""
			}
			if first, _, _ := strings.Cut(rest, " "); first != "" {
				return first
			}
			return "(nothing)"
		}
	}
	if len(unit) > 0 {
		return "(no ExecStart)"
	}
	return ""
}

// SpecNames are the file names of ours in a CDI directory, current and
// past: each kind's cdispec.FileName, and the one spec of versions before
// the vendor kinds (LegacySpec's name). Removal looks for them: uninstall
// cdi here, the .deb's prerm by a copy of this list that test/packages holds
// to it.
func SpecNames() []string {
	names := []string{cdispec.FileName(cdispec.Kind)}
	for _, vk := range cdispec.VendorKinds {
		names = append(names, cdispec.FileName(vk.Kind))
	}
	return append(names, path.Base(LegacySpec))
}

// oursNow lists the spec files of ours present in o.SpecDir: every name
// of SpecNames, the legacy one only when it holds our kind (the name is
// not distinctive enough on its own).
func oursNow(o Options) ([]string, error) {
	var out []string
	for _, n := range SpecNames() {
		f := path.Join(o.SpecDir, n)
		data, err := readOptional(o.path(f))
		if err != nil {
			return nil, err
		}
		if data == nil || (n == path.Base(LegacySpec) && !bytes.Contains(data, []byte(`"kind": "`+cdispec.Kind+`"`))) {
			continue
		}
		out = append(out, f)
	}
	return out, nil
}

func systemctl(o Options) string {
	if o.User {
		return "systemctl --user"
	}
	return "systemctl"
}

// GenerateFlags are `cdi generate`'s flags, parsed here so that the unit's
// ExecStart (GenerateArgs) and the command read the same words.
type GenerateFlags struct {
	Dir       string   // write every kind's file here
	Hook      string   // the spec's hook path; "" for the running binary
	SkipKinds []string // kinds not to write
	Output    string   // write one kind's spec to this file ("-": stdout) instead
	Kind      string   // the kind --output writes
}

// Define defines `cdi generate`'s flags on fs, read into f.
func (f *GenerateFlags) Define(fs *flag.FlagSet) {
	f.Kind = cdispec.Kind
	fs.StringVar(&f.Dir, "dir", "", "write every kind's spec into `DIR` (default "+SystemSpecDir+", $XDG_CONFIG_HOME/cdi when not root)")
	fs.StringVar(&f.Hook, "hook", "", "the wsl-gpu-hook `PATH` the specs run (default: the one next to this binary)")
	fs.Func("skip-kind", "do not write the spec of `KIND` (repeatable)", func(k string) error {
		f.SkipKinds = append(f.SkipKinds, k)
		return nil
	})
	fs.StringVar(&f.Output, "output", "", "write one kind's spec to `FILE` (- for stdout) instead")
	fs.StringVar(&f.Kind, "kind", f.Kind, "the `KIND` --output writes")
}

// Check reports what f cannot mean: flags that exclude each other, a kind
// this producer does not write.
func (f GenerateFlags) Check() error {
	if f.Dir != "" && f.Output != "" {
		return errors.New("--dir and --output exclude each other")
	}
	for _, k := range append(append([]string{}, f.SkipKinds...), f.Kind) {
		if k != cdispec.Kind && !isVendorKind(k) {
			return fmt.Errorf("unknown kind %q (%s)", k, strings.Join(allKinds(), ", "))
		}
	}
	return nil
}

// ParseGenerateArgs reads the words after `cdi generate`, as the command
// does (the unit's ExecStart is held to it).
func ParseGenerateArgs(args []string) (GenerateFlags, error) {
	var f GenerateFlags
	fs := flag.NewFlagSet("cdi generate", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f.Define(fs)
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	if fs.NArg() > 0 {
		return f, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	return f, f.Check()
}

func isVendorKind(k string) bool {
	for _, vk := range cdispec.VendorKinds {
		if vk.Kind == k {
			return true
		}
	}
	return false
}

func allKinds() []string {
	out := []string{cdispec.Kind}
	for _, vk := range cdispec.VendorKinds {
		out = append(out, vk.Kind)
	}
	return out
}

// Options turns the flags back into install options: with the same
// config path, what the unit runs writes what Plan wrote.
func (f GenerateFlags) Options(hookPath, configPath string) Options {
	o := Options{HookPath: hookPath, ConfigPath: configPath, SpecDir: f.Dir, ReadDirs: []string{f.Dir}, Kinds: map[string]Choice{}}
	if f.Dir == SystemSpecDir {
		o.ReadDirs = []string{SystemSpecDir, SystemRunDir}
	}
	if f.Hook != "" {
		o.HookPath = f.Hook
	}
	for _, k := range f.SkipKinds {
		o.Kinds[k] = Skip
	}
	return o
}

// Sync makes o.SpecDir hold exactly the files for specs: each written
// only when its bytes change (engines watching the dir see no event
// otherwise), and our files for kinds no longer generated removed. It
// first makes the conflict check Plan makes, and on a conflict returns a
// ConflictError having written nothing; it moves no other producer's file
// aside (an Ours choice is install's, whose Plan keeps a backup). It
// returns the paths it changed.
func Sync(o Options, specs []*cdi.Spec) ([]string, error) {
	o.Kinds = maps.Clone(o.Kinds)
	for k, c := range o.Kinds {
		if c == Ours {
			delete(o.Kinds, k)
		}
	}
	files, err := resolve(o, specs)
	var ce *ConflictError
	if errors.As(err, &ce) {
		ce.Generate = true
	}
	if err != nil {
		return nil, err
	}
	var changed []string
	for _, f := range slices.Sorted(maps.Keys(files)) {
		full := o.path(f)
		old, err := readOptional(full)
		if err != nil {
			return changed, err
		}
		switch {
		case files[f] == nil:
			if err := os.Remove(full); err != nil {
				return changed, err
			}
		case old != nil && bytes.Equal(old, files[f]):
			continue
		default:
			if err := atomicfile.Write(full, files[f], 0o644, atomicfile.Keep); err != nil {
				return changed, err
			}
		}
		changed = append(changed, f)
	}
	return changed, nil
}
