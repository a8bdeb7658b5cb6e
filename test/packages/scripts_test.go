package packages

import (
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/devnode"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/driverstore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/dxcore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/setup/cdiinstall"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/setup/cdispec"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/setup/install"
)

// packageHook is the binary the package installs, which its specs name.
const packageHook = "/usr/bin/wsl-gpu-hook"

// scriptVar reads NAME="..." from a maintainer script, split on spaces.
func scriptVar(t *testing.T, script, name string) []string {
	t.Helper()
	for _, line := range strings.Split(script, "\n") {
		if v, ok := strings.CutPrefix(line, name+"="); ok {
			return strings.Fields(strings.Trim(v, `"`))
		}
	}
	t.Fatalf("the script sets no %s", name)
	return nil
}

// everyVendor is a host with an adapter of each vendor a kind exists for,
// so Generate writes every spec file it can.
func everyVendor() cdiinstall.Host {
	return cdiinstall.Host{
		Inventory: &driverstore.Inventory{Adapters: []driverstore.Adapter{
			{Adapter: dxcore.Adapter{Index: 0, LUID: dxcore.LUID{Low: 0x1a1d77}}, Vendor: driverstore.Intel, Folder: "iigd"},
			{Adapter: dxcore.Adapter{Index: 1, LUID: dxcore.LUID{Low: 0x4486d1}}, Vendor: driverstore.NVIDIA, Folder: "nvltwi"},
			{Adapter: dxcore.Adapter{Index: 2, LUID: dxcore.LUID{Low: 0x5e1f00}}, Vendor: driverstore.AMD, Folder: "u0"},
		}},
		Device: devnode.Node{Path: "/dev/dxg", Major: 10, Minor: 53},
		LibDir: "/usr/lib/wsl/lib",
	}
}

// TestPrermKnowsOurSpecs holds prerm's lists to the code: the dirs an
// install writes and engines read, every spec name of ours
// (cdiinstall.SpecNames, which has the names of older versions), and
// every file the code writes for a host with every vendor. A new kind,
// or a renamed file, fails here until prerm knows it (issue 33: prerm
// knew only the old name, so removal left the specs behind).
func TestPrermKnowsOurSpecs(t *testing.T) {
	script := string(must(os.ReadFile(filepath.Join(moduleRoot(t), "packaging/scripts/common.sh"))))
	o := cdiinstall.System(packageHook, "")
	if got := scriptVar(t, script, "cdi_dirs"); !reflect.DeepEqual(got, o.ReadDirs) {
		t.Errorf("prerm cdi_dirs %v, the system install reads %v", got, o.ReadDirs)
	}
	names := scriptVar(t, script, "cdi_specs")
	want := cdiinstall.SpecNames()
	if !reflect.DeepEqual(sorted(names), sorted(want)) {
		t.Errorf("prerm cdi_specs %v, the code's names %v", names, want)
	}
	h := everyVendor()
	specs, err := cdispec.Generate(h.Inventory, o.SpecOptions(h.Device, h.LibDir))
	if err != nil {
		t.Fatal(err)
	}
	files, err := cdiinstall.Files(o, specs)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 1+len(cdispec.VendorKinds) {
		t.Errorf("a host with every vendor gets %d spec files, want one per kind", len(files))
	}
	for f := range files {
		if !slices.Contains(names, path.Base(f)) {
			t.Errorf("install cdi writes %s, which prerm does not know", f)
		}
	}
	for _, v := range []struct{ name, want string }{{"unit", cdiinstall.UnitName}, {"hook", packageHook}} {
		if got := scriptVar(t, script, v.name); len(got) != 1 || got[0] != v.want {
			t.Errorf("prerm %s=%v, want %s", v.name, got, v.want)
		}
	}
	if got, want := scriptVar(t, script, "bak"), strings.TrimPrefix(install.Change{Path: "x", Old: []byte{}}.Backup(), "x"); len(got) != 1 || got[0] != want {
		t.Errorf("prerm bak=%v, install's backups end in %s", got, want)
	}
}

// TestPrermRemove runs each format's removal script (the deb's prerm, the
// rpm's %preun, the apk's pre-deinstall) on a tree `install cdi` made for
// the package's binary (specs, backups of earlier ones, the unit,
// enabled), with other producers' files beside them, for another root
// (DPKG_ROOT; rpm and apk run theirs chrooted, and the scripts honour it
// all the same): ours go, every other file stays as it was. An upgrade
// (prerm upgrade, %preun 1) touches nothing.
func TestPrermRemove(t *testing.T) {
	nvidia := string(must(os.ReadFile(filepath.Join(moduleRoot(t), "pkg/setup/cdiinstall/testdata/nvidia-ctk-1.20-wsl.yaml"))))
	elsewhere := `{"cdiVersion": "0.5.0", "kind": "wsl-gpu-hook.dev/gpu", "devices": [{"name": "all", "containerEdits": {"hooks": [{"hookName": "createContainer", "path": "/usr/local/bin/wsl-gpu-hook"}]}}]}`
	foreign := map[string]string{
		// NVIDIA's, written after install (its refresh service at boot).
		"/var/run/cdi/nvidia.yaml": nvidia,
		// NVIDIA's, moved aside by install --nvidia-kind=ours.
		"/etc/cdi/nvidia.yaml.wsl-gpu-hook.bak": nvidia,
		// Another vendor's.
		"/etc/cdi/vendor.example-dev.json": `{"cdiVersion": "0.5.0", "kind": "vendor.example/dev", "devices": [{"name": "a", "containerEdits": {"env": ["A=b"]}}]}`,
		// A spec of ours by name, from a wsl-gpu-hook installed
		// elsewhere, which still works once the package is gone.
		"/var/run/cdi/wsl-gpu-hook.json":                  elsewhere,
		"/var/run/cdi/wsl-gpu-hook.json.wsl-gpu-hook.bak": elsewhere,
		// Someone else's unit.
		"/etc/systemd/system/multi-user.target.wants/docker.service": "",
	}
	tests := []prermCase{
		{name: "remove", arg: "remove", gone: []string{
			"/etc/cdi/nvidia.com-gpu_wsl-gpu-hook.json", "/etc/cdi/wsl-gpu-hook.dev-gpu.json",
			"/etc/cdi/wsl-gpu-hook.dev-gpu.json.wsl-gpu-hook.bak", "/etc/cdi/amd.com-gpu_wsl-gpu-hook.json",
			"/etc/cdi/nvidia.com-gpu_wsl-gpu-hook.json.wsl-gpu-hook.bak", "/etc/cdi/amd.com-gpu_wsl-gpu-hook.json.wsl-gpu-hook.bak",
			"/etc/systemd/system/" + cdiinstall.UnitName, "/etc/systemd/system/" + cdiinstall.UnitName + ".wsl-gpu-hook.bak",
			"/etc/systemd/system/multi-user.target.wants/" + cdiinstall.UnitName,
		}},
		{name: "remove, the unit runs another binary", arg: "remove", unitElsewhere: true, gone: []string{
			"/etc/cdi/nvidia.com-gpu_wsl-gpu-hook.json", "/etc/cdi/wsl-gpu-hook.dev-gpu.json",
			"/etc/cdi/wsl-gpu-hook.dev-gpu.json.wsl-gpu-hook.bak", "/etc/cdi/amd.com-gpu_wsl-gpu-hook.json",
			"/etc/cdi/nvidia.com-gpu_wsl-gpu-hook.json.wsl-gpu-hook.bak", "/etc/cdi/amd.com-gpu_wsl-gpu-hook.json.wsl-gpu-hook.bak",
		}},
		{name: "remove, the shipped unit enabled", arg: "remove", shipped: true, gone: []string{
			"/etc/cdi/nvidia.com-gpu_wsl-gpu-hook.json", "/etc/cdi/wsl-gpu-hook.dev-gpu.json",
			"/etc/cdi/wsl-gpu-hook.dev-gpu.json.wsl-gpu-hook.bak", "/etc/cdi/amd.com-gpu_wsl-gpu-hook.json",
			"/etc/cdi/nvidia.com-gpu_wsl-gpu-hook.json.wsl-gpu-hook.bak", "/etc/cdi/amd.com-gpu_wsl-gpu-hook.json.wsl-gpu-hook.bak",
			"/etc/systemd/system/multi-user.target.wants/" + cdiinstall.UnitName,
		}},
		{name: "upgrade", arg: "upgrade"},
	}
	scripts := []struct {
		format, path    string
		remove, upgrade string // the arguments the package manager passes
	}{
		{"deb", "packaging/scripts/deb/prerm", "remove", "upgrade"},
		{"rpm", "packaging/scripts/rpm/preun", "0", "1"},
		{"apk", "packaging/scripts/apk/pre-deinstall", "", ""}, // apk runs pre-upgrade on upgrades
	}
	for _, sc := range scripts {
		for _, tt := range tests {
			arg := sc.remove
			if tt.arg == "upgrade" {
				if sc.upgrade == "" {
					continue
				}
				arg = sc.upgrade
			}
			t.Run(sc.format+"/"+tt.name, func(t *testing.T) {
				prermRemove(t, filepath.Join(moduleRoot(t), sc.path), arg, tt, foreign)
			})
		}
	}
}

// prermCase is one tree for TestPrermRemove.
type prermCase struct {
	name string
	arg  string // remove or upgrade
	// unitElsewhere: install cdi was run from /usr/local/bin, so the
	// unit in /etc runs that binary and stays enabled; shipped: the
	// package's own unit was enabled, and none is in /etc.
	unitElsewhere, shipped bool
	gone                   []string // system paths prerm removes
}

// prermRemove runs script with arg on the tree tt describes and checks
// that exactly tt.gone went.
func prermRemove(t *testing.T, script, arg string, tt prermCase, foreign map[string]string) {
	root := t.TempDir()
	// What install cdi writes for the package's binary, run twice
	// with another --config the second time (so Apply kept
	// backups of the specs and the unit).
	for _, config := range []string{"", "/etc/wsl-gpu-hook/mine.toml"} {
		o := cdiinstall.System(packageHook, config)
		o.Prefix = root
		p, err := cdiinstall.Plan(o, everyVendor(), false)
		if err != nil {
			t.Fatal(err)
		}
		if err := install.Apply(install.Options{Prefix: root}, p); err != nil {
			t.Fatal(err)
		}
	}
	if tt.unitElsewhere {
		unit := filepath.Join(root, cdiinstall.SystemUnitPath)
		data := strings.ReplaceAll(string(must(os.ReadFile(unit))), packageHook, "/usr/local/bin/wsl-gpu-hook")
		if err := os.WriteFile(unit, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	unit := cdiinstall.SystemUnitPath
	if tt.shipped {
		for _, f := range []string{unit, unit + ".wsl-gpu-hook.bak"} {
			if err := os.Remove(filepath.Join(root, f)); err != nil {
				t.Fatal(err)
			}
		}
		unit = "/usr/lib/systemd/system/" + cdiinstall.UnitName
	}
	// systemctl enable: the link WantedBy= names.
	link := filepath.Join(root, "/etc/systemd/system/multi-user.target.wants", cdiinstall.UnitName)
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(unit, link); err != nil {
		t.Fatal(err)
	}
	for p, data := range foreign {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	before := listFiles(t, root)
	for _, g := range tt.gone {
		if _, ok := before[g]; !ok {
			t.Fatalf("the tree lacks %s before prerm: %v", g, sorted(keysOf(before)))
		}
	}

	cmd := exec.Command("sh", script, arg)
	cmd.Env = append(os.Environ(), "DPKG_ROOT="+root)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", script, arg, err, out)
	}
	t.Logf("%s %s:\n%s", script, arg, out)
	want := before
	for _, g := range tt.gone {
		delete(want, g)
	}
	wantSame(t, "files after "+filepath.Base(script)+" "+arg, want, listFiles(t, root))
	if tt.arg == "remove" {
		want := "wsl-gpu-hook: /etc/cdi/nvidia.yaml.wsl-gpu-hook.bak is another producer's CDI spec that 'wsl-gpu-hook install cdi' moved aside: move it back to /etc/cdi/nvidia.yaml if you want it\n"
		if string(out) != want {
			t.Errorf("prerm says:\n%s\nwant only where NVIDIA's moved-aside spec is:\n%s", out, want)
		}
	}
}

// listFiles maps every file and link under root (by its path from root,
// with a leading /) to its content or link target.
func listFiles(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel := "/" + must(filepath.Rel(root, p))
		if d.Type()&os.ModeSymlink != 0 {
			out[rel] = "-> " + must(os.Readlink(p))
			return nil
		}
		out[rel] = string(must(os.ReadFile(p)))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func keysOf(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	sort.Strings(s)
	return s
}
