package nodesetup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/devnode"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/driverstore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/dxcore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/setup/cdiinstall"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/setup/cdispec"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/atomicfile"
)

// packageHook is what the host package's `install cdi` writes in its specs.
const packageHook = "/usr/bin/wsl-gpu-hook"

// laptop is an Intel + NVIDIA host: cdi generate writes our kind's spec and
// NVIDIA's, and no AMD one.
var laptop = &driverstore.Inventory{Adapters: []driverstore.Adapter{
	{Adapter: dxcore.Adapter{Index: 0, LUID: dxcore.LUID{Low: 0x1a1d77}}, Vendor: driverstore.Intel, Folder: "iigd"},
	{Adapter: dxcore.Adapter{Index: 1, LUID: dxcore.LUID{Low: 0x4486d1}}, Vendor: driverstore.NVIDIA, Folder: "nvltwi"},
}}

// specs are the spec files cdi generate makes for the laptop with hook,
// by file name.
func specs(t *testing.T, hook string) map[string][]byte {
	t.Helper()
	o := cdiinstall.System(hook, "")
	s, err := cdispec.Generate(laptop, o.SpecOptions(devnode.Node{Path: "/dev/dxg", Major: 10, Minor: 53}, "/usr/lib/wsl/lib"))
	if err != nil {
		t.Fatal(err)
	}
	files, err := cdiinstall.Files(o, s)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for f, data := range files {
		out[filepath.Base(f)] = data
	}
	return out
}

// generator is `wsl-gpu-ctl cdi generate --dir DIR --hook HOOK` on the
// laptop: the same Sync the command runs, which writes every spec name of
// ours in DIR it generates.
func generator(t *testing.T) func(dir, hook string) (string, error) {
	return func(dir, hook string) (string, error) {
		o := cdiinstall.Options{HookPath: hook, SpecDir: dir, ReadDirs: []string{dir}}
		s, err := cdispec.Generate(laptop, o.SpecOptions(devnode.Node{Path: "/dev/dxg", Major: 10, Minor: 53}, "/usr/lib/wsl/lib"))
		if err != nil {
			return "", err
		}
		changed, err := cdiinstall.Sync(o, s)
		var out strings.Builder
		for _, c := range changed {
			fmt.Fprintf(&out, "cdi: wrote %s\n", c)
		}
		return out.String(), err
	}
}

// Another installer's spec under one of setup's names (the host package's
// `install cdi` writing into the node's CDI dir) is neither overwritten by
// Apply nor removed by Remove, whether it was there before the chart or
// came after setup recorded the name; setup's own files still go.
func TestAnotherInstallersSpecSurvives(t *testing.T) {
	theirs := specs(t, packageHook)
	tests := []struct {
		name string
		// before: their files in the CDI dir before Apply; after: written
		// between Apply and Remove.
		before, after []string
		wantErr       string // Apply's error, "" for none
		wantRemoved   []string
	}{
		{
			name:        "our kind's spec, there first",
			before:      []string{"wsl-gpu-hook.dev-gpu.json"},
			wantErr:     "node setup: /var/run/cdi/wsl-gpu-hook.dev-gpu.json is another installation's CDI spec (its hooks run /usr/bin/wsl-gpu-hook): left as it is and no spec written; remove it if that installation is gone, or set nodeSetup.cdiDir to another CDI dir",
			wantRemoved: []string{"removed /var/lib/wsl-gpu-hook/wsl-gpu-hook", "removed /var/lib/wsl-gpu-hook/wsl-gpu-ctl", "removed /var/lib/wsl-gpu-hook"},
		},
		{
			name:        "NVIDIA's kind, there first",
			before:      []string{"nvidia.com-gpu_wsl-gpu-hook.json"},
			wantErr:     "node setup: /var/run/cdi/nvidia.com-gpu_wsl-gpu-hook.json is another installation's CDI spec (its hooks run /usr/bin/wsl-gpu-hook)",
			wantRemoved: []string{"removed /var/lib/wsl-gpu-hook/wsl-gpu-hook", "removed /var/lib/wsl-gpu-hook/wsl-gpu-ctl", "removed /var/lib/wsl-gpu-hook"},
		},
		{
			// Setup recorded the name while the file was absent (this
			// laptop has no AMD adapter); the host wrote it later.
			name:  "a name setup recorded, written after by the host",
			after: []string{"amd.com-gpu_wsl-gpu-hook.json"},
			wantRemoved: []string{"removed /var/run/cdi/wsl-gpu-hook.dev-gpu.json", "removed /var/run/cdi/nvidia.com-gpu_wsl-gpu-hook.json",
				"removed /var/lib/wsl-gpu-hook/wsl-gpu-hook", "removed /var/lib/wsl-gpu-hook/wsl-gpu-ctl", "removed /var/lib/wsl-gpu-hook"},
		},
	}
	amd := strings.ReplaceAll(string(theirs["nvidia.com-gpu_wsl-gpu-hook.json"]), "nvidia.com/gpu", "amd.com/gpu")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			img := t.TempDir()
			hook, ctl := filepath.Join(img, "wsl-gpu-hook"), filepath.Join(img, "wsl-gpu-ctl")
			os.WriteFile(hook, []byte("hook"), 0o755)
			os.WriteFile(ctl, []byte("ctl"), 0o755)
			root := t.TempDir()
			cdiDir := filepath.Join(root, "var/run/cdi")
			os.MkdirAll(cdiDir, 0o755)
			os.MkdirAll(filepath.Join(root, "var/lib"), 0o755)
			want := map[string]string{}
			put := func(name string) {
				data, ok := theirs[name]
				if name == "amd.com-gpu_wsl-gpu-hook.json" {
					data, ok = []byte(amd), true
				}
				if !ok {
					t.Fatalf("no spec %s", name)
				}
				if err := os.WriteFile(filepath.Join(cdiDir, name), data, 0o644); err != nil {
					t.Fatal(err)
				}
				want[name] = string(data)
			}
			for _, f := range tt.before {
				put(f)
			}
			s := Setup{Owner: atomicfile.Keep, Root: root, HookDir: DefaultHookDir, CDIDir: DefaultCDIDir, Binaries: []string{hook, ctl}, Generate: generator(t)}
			_, err := s.Apply()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("Apply: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.wantErr)):
				t.Errorf("Apply = %v\nwant %s", err, tt.wantErr)
			case tt.wantErr != "" && !errors.As(err, new(*ForeignSpecError)):
				t.Errorf("Apply = %T, want a *ForeignSpecError", err)
			}
			if tt.wantErr != "" {
				if _, err := os.Stat(filepath.Join(root, DefaultHookDir, "wsl-gpu-hook")); err != nil {
					t.Errorf("the hook copy is not installed beside another installer's spec: %v", err)
				}
			}
			check := func(when string) {
				for name, data := range want {
					if got, err := os.ReadFile(filepath.Join(cdiDir, name)); err != nil || string(got) != data {
						t.Errorf("%s: the host's %s: %v, changed: %v", when, name, err, string(got) != data)
					}
				}
			}
			check("after Apply")
			for _, f := range tt.after {
				put(f)
			}
			removed, err := s.Remove()
			if err != nil {
				t.Fatal(err)
			}
			check("after Remove")
			if !reflect.DeepEqual(removed, tt.wantRemoved) {
				t.Errorf("Remove removed %q\nwant %q", removed, tt.wantRemoved)
			}
		})
	}
}
