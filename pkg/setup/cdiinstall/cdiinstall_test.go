package cdiinstall

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/devnode"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/driverstore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/dxcore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/setup/cdispec"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/setup/install"
)

func laptop() Host {
	return Host{
		Inventory: &driverstore.Inventory{Adapters: []driverstore.Adapter{
			{Adapter: dxcore.Adapter{Index: 0, LUID: dxcore.LUID{Low: 0x1a1d77}}, Vendor: driverstore.Intel, Folder: "iigd"},
			{Adapter: dxcore.Adapter{Index: 1, LUID: dxcore.LUID{Low: 0x4486d1}}, Vendor: driverstore.NVIDIA, Folder: "nvltwi"},
		}},
		Device: devnode.Node{Path: "/dev/dxg", Major: 10, Minor: 53},
		LibDir: "/usr/lib/wsl/lib",
	}
}

// nvidiaSpecFile is what `nvidia-ctk cdi generate` 1.20 writes on WSL for
// the simulated laptop's NVIDIA folder: one device, nvidia.com/gpu=all.
const nvidiaSpecFile = "testdata/nvidia-ctk-1.20-wsl.yaml"

func nvidiaSpec(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(nvidiaSpecFile)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func write(t *testing.T, root, p, data string) {
	t.Helper()
	full := filepath.Join(root, p)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(full, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func paths(p *install.Plan) []string {
	var out []string
	for _, c := range p.Changes {
		out = append(out, c.Action()+" "+c.Path)
	}
	sort.Strings(out)
	return out
}

func TestPlanConflicts(t *testing.T) {
	nvidiaYAML := nvidiaSpec(t)
	tests := []struct {
		name    string
		files   map[string]string // existing, system paths
		choice  Choice
		want    []string // changes
		wantErr string   // a ConflictError containing this
	}{
		{name: "clean host", want: []string{
			"create /etc/cdi/nvidia.com-gpu_wsl-gpu-hook.json", "create /etc/cdi/wsl-gpu-hook.dev-gpu.json", "create " + SystemUnitPath,
		}},
		{name: "NVIDIA's spec in /etc/cdi, no choice", files: map[string]string{"/etc/cdi/nvidia.yaml": nvidiaYAML},
			wantErr: "nvidia.com/gpu already defined by /etc/cdi/nvidia.yaml (nvidia.com/gpu=all): nothing changed: choose --nvidia-kind=ours|skip (see above)"},
		// /var/run/cdi ranks higher: NVIDIA's would silently win.
		{name: "NVIDIA's spec in /var/run/cdi, no choice", files: map[string]string{"/var/run/cdi/nvidia.yaml": nvidiaYAML},
			wantErr: "already defined by /var/run/cdi/nvidia.yaml"},
		{name: "NVIDIA's spec, ours", files: map[string]string{"/var/run/cdi/nvidia.yaml": nvidiaYAML}, choice: Ours, want: []string{
			"create /etc/cdi/nvidia.com-gpu_wsl-gpu-hook.json", "create /etc/cdi/wsl-gpu-hook.dev-gpu.json", "create " + SystemUnitPath,
			"remove /var/run/cdi/nvidia.yaml",
		}},
		{name: "NVIDIA's spec, skip", files: map[string]string{"/etc/cdi/nvidia.yaml": nvidiaYAML}, choice: Skip, want: []string{
			"create /etc/cdi/wsl-gpu-hook.dev-gpu.json", "create " + SystemUnitPath,
		}},
		{name: "skip after ours removes our NVIDIA file", choice: Skip,
			files: map[string]string{"/etc/cdi/nvidia.com-gpu_wsl-gpu-hook.json": "{}"},
			want:  []string{"create /etc/cdi/wsl-gpu-hook.dev-gpu.json", "create " + SystemUnitPath, "remove /etc/cdi/nvidia.com-gpu_wsl-gpu-hook.json"}},
		{name: "the spec of older versions goes", files: map[string]string{LegacySpec: `{"cdiVersion": "0.5.0", "kind": "wsl-gpu-hook.dev/gpu", "devices": [{"name": "all", "containerEdits": {"env": ["A=b"]}}]}`},
			want: []string{
				"create /etc/cdi/nvidia.com-gpu_wsl-gpu-hook.json", "create /etc/cdi/wsl-gpu-hook.dev-gpu.json", "create " + SystemUnitPath,
				"remove " + LegacySpec,
			}},
		{name: "someone else's wsl-gpu-hook.dev spec", files: map[string]string{"/etc/cdi/other.json": `{"cdiVersion": "0.5.0", "kind": "wsl-gpu-hook.dev/gpu", "devices": [{"name": "all", "containerEdits": {"env": ["A=b"]}}]}`},
			wantErr: "wsl-gpu-hook.dev/gpu already defined by /etc/cdi/other.json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			for p, data := range tt.files {
				write(t, root, p, data)
			}
			o := System("/usr/local/bin/wsl-gpu-hook", "")
			o.Prefix = root
			if tt.choice != Ask {
				o.Kinds[cdispec.NVIDIAKind] = tt.choice
			}
			p, err := Plan(o, laptop(), false)
			if tt.wantErr != "" {
				var ce *ConflictError
				if !errors.As(err, &ce) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want a conflict %q", err, tt.wantErr)
				}
				if !strings.Contains(ce.Explain(), "ours") || !strings.Contains(ce.Explain(), "skip") {
					t.Errorf("explanation lacks the choices:\n%s", ce.Explain())
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := paths(p); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("changes:\n got %v\nwant %v", got, tt.want)
			}
			// Applied, the dirs hold no conflict as engines see them, and
			// a second plan changes nothing.
			if err := install.Apply(install.Options{Prefix: root}, p); err != nil {
				t.Fatal(err)
			}
			o.Kinds = map[string]Choice{}
			if tt.choice == Skip {
				o.Kinds[cdispec.NVIDIAKind] = Skip
			}
			again, err := Plan(o, laptop(), false)
			if err != nil {
				t.Fatalf("second plan: %v", err)
			}
			if len(again.Changes) != 0 {
				t.Errorf("second plan changes %v", paths(again))
			}
		})
	}
}

// TestUnitMatchesSpec: the unit's ExecStart, parsed as `cdi generate`
// parses it, makes the very bytes install writes (issue: the spec named
// the running binary and --config while the unit used defaults).
func TestUnitMatchesSpec(t *testing.T) {
	for _, tt := range []struct {
		name string
		o    Options
	}{
		{"defaults", System("/usr/local/bin/wsl-gpu-hook", "")},
		{"other hook and config", System("/opt/wsl gpu/bin/wsl-gpu-hook", "/etc/wsl-gpu-hook/100% mine.toml")},
		{"skip NVIDIA", func() Options {
			o := System("/usr/bin/wsl-gpu-hook", "/etc/x.toml")
			o.Kinds[cdispec.NVIDIAKind] = Skip
			return o
		}()},
		{"user", User("/home/u/bin/wsl-gpu-hook", "", "/home/u", "", "/run/user/1000")},
		// A newline in a path must not end the ExecStart line: what
		// followed would be a directive of its own.
		{"a config path with a newline and a tab", System("/usr/bin/wsl-gpu-hook", "/etc/x\nExecStartPre=/bin/touch /pwned\t\x01.toml")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			tt.o.Prefix = root
			p, err := Plan(tt.o, laptop(), false)
			if err != nil {
				t.Fatal(err)
			}
			planned := map[string]string{}
			for _, c := range p.Changes {
				planned[c.Path] = string(c.New)
			}
			unit, ok := planned[tt.o.UnitPath]
			if !ok {
				t.Fatalf("no unit planned at %s: %v", tt.o.UnitPath, paths(p))
			}
			if d := directives(unit); len(d["ExecStart"]) != 1 || len(d["ExecStartPre"]) != 0 {
				t.Errorf("the unit's ExecStart is not one line:\n%s", unit)
			}
			argv, err := execStart(unit)
			if err != nil {
				t.Fatal(err)
			}
			// What main does: [--config FILE] cdi generate FLAGS.
			if argv[0] != tt.o.HookPath {
				t.Errorf("unit runs %s, spec hook is %s", argv[0], tt.o.HookPath)
			}
			args, config := argv[1:], ""
			if len(args) > 1 && args[0] == "--config" {
				config, args = args[1], args[2:]
			}
			if config != tt.o.ConfigPath {
				t.Errorf("unit --config %q, want %q", config, tt.o.ConfigPath)
			}
			if len(args) < 2 || args[0] != "cdi" || args[1] != "generate" {
				t.Fatalf("unit runs %v", argv)
			}
			flags, err := ParseGenerateArgs(args[2:])
			if err != nil {
				t.Fatal(err)
			}
			uo := flags.Options("/the/running/binary", config)
			uo.Prefix = root
			specs, err := cdispec.Generate(laptop().Inventory, uo.SpecOptions(laptop().Device, laptop().LibDir))
			if err != nil {
				t.Fatal(err)
			}
			files, err := Files(uo, specs)
			if err != nil {
				t.Fatal(err)
			}
			for f, data := range files {
				if planned[f] != string(data) {
					t.Errorf("%s: the unit would write\n%s\ninstall writes\n%s", f, data, planned[f])
				}
				delete(planned, f)
			}
			delete(planned, tt.o.UnitPath)
			if len(planned) != 0 {
				t.Errorf("install writes files the unit does not: %v", planned)
			}
			// And Sync, what `cdi generate` does, leaves them as they are.
			if err := install.Apply(install.Options{Prefix: root}, p); err != nil {
				t.Fatal(err)
			}
			changed, err := Sync(uo, specs)
			if err != nil || len(changed) != 0 {
				t.Errorf("cdi generate after install changed %v (%v)", changed, err)
			}
			if tt.o.User && (!strings.Contains(unit, "WantedBy=default.target") || strings.Contains(unit, "Before=docker")) {
				t.Errorf("user unit:\n%s", unit)
			}
		})
	}
}

func TestUserPaths(t *testing.T) {
	o := User("/h", "", "/home/u", "/home/u/.cfg", "/run/user/1000")
	if o.SpecDir != "/home/u/.cfg/cdi" || o.UnitPath != "/home/u/.cfg/systemd/user/"+UnitName ||
		!reflect.DeepEqual(o.ReadDirs, []string{"/home/u/.cfg/cdi", "/run/user/1000/cdi"}) {
		t.Errorf("user options %+v", o)
	}
	if o := User("/h", "", "/home/u", "", ""); o.SpecDir != "/home/u/.config/cdi" {
		t.Errorf("default XDG_CONFIG_HOME: %s", o.SpecDir)
	}
}

func TestSyncRewritesOnlyOnChange(t *testing.T) {
	root := t.TempDir()
	o := GenerateFlags{Dir: "/etc/cdi"}.Options("/usr/local/bin/wsl-gpu-hook", "")
	o.Prefix = root
	h := laptop()
	specs, err := cdispec.Generate(h.Inventory, o.SpecOptions(h.Device, h.LibDir))
	if err != nil {
		t.Fatal(err)
	}
	if changed, err := Sync(o, specs); err != nil || len(changed) != 2 {
		t.Fatalf("first sync changed %v, %v", changed, err)
	}
	f := filepath.Join(root, "/etc/cdi", cdispec.FileName(cdispec.Kind))
	before, _ := os.Stat(f)
	if changed, err := Sync(o, specs); err != nil || len(changed) != 0 {
		t.Fatalf("second sync changed %v, %v", changed, err)
	}
	after, _ := os.Stat(f)
	if !os.SameFile(before, after) {
		t.Error("an unchanged spec was replaced: engines watching the dir see an event")
	}
	// The NVIDIA GPU is gone: its kind's file goes too.
	h.Inventory.Adapters = h.Inventory.Adapters[:1]
	specs, _ = cdispec.Generate(h.Inventory, o.SpecOptions(h.Device, h.LibDir))
	changed, err := Sync(o, specs)
	if err != nil || !reflect.DeepEqual(changed, []string{"/etc/cdi/nvidia.com-gpu_wsl-gpu-hook.json", "/etc/cdi/wsl-gpu-hook.dev-gpu.json"}) {
		t.Errorf("after the NVIDIA GPU left: changed %v, %v", changed, err)
	}
	if _, err := os.Stat(filepath.Join(root, "/etc/cdi/nvidia.com-gpu_wsl-gpu-hook.json")); err == nil {
		t.Error("nvidia.com/gpu spec left behind without an NVIDIA GPU")
	}
}

func TestParseGenerateArgs(t *testing.T) {
	f, err := ParseGenerateArgs([]string{"--dir", "/d", "--hook=/h", "--skip-kind", "nvidia.com/gpu"})
	if err != nil || f.Dir != "/d" || f.Hook != "/h" || !reflect.DeepEqual(f.SkipKinds, []string{"nvidia.com/gpu"}) {
		t.Errorf("%+v %v", f, err)
	}
	for _, bad := range [][]string{{"--dir"}, {"--dir", "/d", "--output", "x"}, {"--skip-kind", "intel.com/gpu"}, {"--frob", "1"}, {"stray"}} {
		if _, err := ParseGenerateArgs(bad); err == nil {
			t.Errorf("ParseGenerateArgs(%v) succeeded", bad)
		}
	}
}

// listTree maps every file under root to its bytes: a test's way to see
// that nothing was written.
func listTree(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		out[strings.TrimPrefix(p, root)] = string(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestSyncRefusesAConflict is issue 33: `cdi generate` (the boot unit)
// wrote its specs beside NVIDIA's nvidia.yaml, and only then said that
// engines refuse nvidia.com/gpu=all. It must find that first and write
// nothing.
func TestSyncRefusesAConflict(t *testing.T) {
	nvidia := nvidiaSpec(t)
	ourOld := `{"cdiVersion": "0.5.0", "kind": "nvidia.com/gpu", "devices": [{"name": "all", "containerEdits": {"env": ["A=b"]}}]}`
	tests := []struct {
		name    string
		files   map[string]string
		skip    []string
		wantErr string // "" for no conflict
	}{
		{name: "NVIDIA's spec in the dir", files: map[string]string{"/etc/cdi/nvidia.yaml": nvidia},
			wantErr: "nvidia.com/gpu already defined by /etc/cdi/nvidia.yaml (nvidia.com/gpu=all): nothing changed: " +
				"remove that file (NVIDIA's refresh service writes it again: systemctl disable --now nvidia-cdi-refresh.path nvidia-cdi-refresh.service), " +
				"or leave the kind to it with --skip-kind nvidia.com/gpu (for the boot unit: wsl-gpu-hook install --nvidia-kind=skip cdi)"},
		{name: "NVIDIA's spec in /var/run/cdi, which wins", files: map[string]string{"/var/run/cdi/nvidia.yaml": nvidia},
			wantErr: "nvidia.com/gpu already defined by /var/run/cdi/nvidia.yaml (nvidia.com/gpu=all): nothing changed: "},
		{name: "NVIDIA's spec beside an older one of ours", files: map[string]string{
			"/etc/cdi/nvidia.yaml": nvidia, "/etc/cdi/nvidia.com-gpu_wsl-gpu-hook.json": ourOld},
			wantErr: "nvidia.com/gpu already defined by /etc/cdi/nvidia.yaml (nvidia.com/gpu=all): nothing changed: "},
		{name: "NVIDIA's spec, kind skipped", files: map[string]string{"/etc/cdi/nvidia.yaml": nvidia}, skip: []string{cdispec.NVIDIAKind}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			for p, data := range tt.files {
				write(t, root, p, data)
			}
			o := GenerateFlags{Dir: SystemSpecDir, SkipKinds: tt.skip}.Options("/usr/bin/wsl-gpu-hook", "")
			o.Prefix = root
			h := laptop()
			specs, err := cdispec.Generate(h.Inventory, o.SpecOptions(h.Device, h.LibDir))
			if err != nil {
				t.Fatal(err)
			}
			before := listTree(t, root)
			changed, err := Sync(o, specs)
			if tt.wantErr == "" {
				if err != nil || len(changed) == 0 {
					t.Fatalf("Sync = %v, %v; want our specs written", changed, err)
				}
				if got := listTree(t, root)["/etc/cdi/nvidia.yaml"]; got != nvidia {
					t.Error("NVIDIA's spec changed")
				}
				return
			}
			var ce *ConflictError
			if !errors.As(err, &ce) || !strings.HasPrefix(err.Error(), tt.wantErr) {
				t.Fatalf("Sync error:\n %v\nwant a conflict starting\n %s", err, tt.wantErr)
			}
			if len(changed) != 0 {
				t.Errorf("Sync reports writes %v with a conflict", changed)
			}
			if after := listTree(t, root); !reflect.DeepEqual(after, before) {
				t.Errorf("Sync changed the tree with a conflict:\nbefore %v\nafter  %v", keys(before), keys(after))
			}
		})
	}
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestUninstallTakesOnlyItsOwn: `uninstall cdi` removes the specs and the
// unit this binary's install wrote, and leaves those of a wsl-gpu-hook
// installed elsewhere (the package's /usr/bin one, seen from a tarball's
// /usr/local/bin one), which still work, saying so.
func TestUninstallTakesOnlyItsOwn(t *testing.T) {
	const pkgHook, tarHook = "/usr/bin/wsl-gpu-hook", "/usr/local/bin/wsl-gpu-hook"
	root := t.TempDir()
	installed := System(pkgHook, "")
	installed.Prefix = root
	p, err := Plan(installed, laptop(), false)
	if err != nil {
		t.Fatal(err)
	}
	if err := install.Apply(install.Options{Prefix: root}, p); err != nil {
		t.Fatal(err)
	}
	files := func(p *install.Plan) []string {
		var out []string
		for _, c := range p.Changes {
			out = append(out, c.Path)
		}
		sort.Strings(out)
		return out
	}
	wrote := files(p)
	for _, tt := range []struct {
		hook     string
		removed  []string
		warnings int
	}{
		{tarHook, nil, len(wrote)},
		{pkgHook, wrote, 0},
	} {
		o := System(tt.hook, "")
		o.Prefix = root
		p, err := Plan(o, Host{}, true)
		if err != nil {
			t.Fatal(err)
		}
		if got := files(p); !reflect.DeepEqual(got, tt.removed) {
			t.Errorf("uninstall cdi by %s removes %v, want %v", tt.hook, got, tt.removed)
		}
		if len(p.Warnings) != tt.warnings {
			t.Errorf("uninstall cdi by %s warns %q, want one line per file it leaves (%d)", tt.hook, p.Warnings, tt.warnings)
		}
		for _, w := range p.Warnings {
			if !strings.Contains(w, pkgHook) || !strings.Contains(w, "stays") {
				t.Errorf("warning %q does not say what runs the file and that it stays", w)
			}
		}
	}
}
