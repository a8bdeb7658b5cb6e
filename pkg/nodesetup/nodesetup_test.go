package nodesetup

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// tree lists every path under root, relative, sorted.
func tree(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err == nil && p != root {
			rel, _ := filepath.Rel(root, p)
			out = append(out, rel)
		}
		return nil
	})
	return out
}

func TestApplyThenRemoveLeavesTheNodeAsItWas(t *testing.T) {
	img := t.TempDir()
	hook, ctl := filepath.Join(img, "wsl-gpu-hook"), filepath.Join(img, "wsl-gpu-ctl")
	os.WriteFile(hook, []byte("hook v1"), 0o755)
	os.WriteFile(ctl, []byte("ctl"), 0o755)
	root := t.TempDir()
	// The node has /var/run and /var/lib, not the dirs setup makes, and
	// another producer's spec that must survive.
	for _, d := range []string{"var/run", "var/lib/kubelet"} {
		os.MkdirAll(filepath.Join(root, d), 0o755)
	}
	os.MkdirAll(filepath.Join(root, "etc/cdi"), 0o755)
	os.WriteFile(filepath.Join(root, "etc/cdi/nvidia.yaml"), []byte("theirs"), 0o644)
	before := tree(t, root)

	var calls []string
	s := Setup{Root: root, HookDir: DefaultHookDir, CDIDir: DefaultCDIDir, Binaries: []string{hook, ctl},
		Generate: func(dir, hookPath string) (string, error) {
			calls = append(calls, dir+" "+hookPath)
			f := filepath.Join(dir, "wsl-gpu-hook.dev-gpu.json")
			if _, err := os.Stat(f); err == nil {
				return "", nil
			}
			os.WriteFile(f, []byte("{}"), 0o644)
			return "cdi: wrote " + f + "\n", nil
		}}
	changed, err := s.Apply()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"installed /var/lib/wsl-gpu-hook/wsl-gpu-hook", "installed /var/lib/wsl-gpu-hook/wsl-gpu-ctl", "wrote /var/run/cdi/wsl-gpu-hook.dev-gpu.json"}
	if !reflect.DeepEqual(changed, want) {
		t.Errorf("first Apply: %q, want %q", changed, want)
	}
	if len(calls) != 1 || calls[0] != filepath.Join(root, "var/run/cdi")+" /var/lib/wsl-gpu-hook/wsl-gpu-hook" {
		t.Errorf("generate called with %q: want the node's CDI dir and the hook's node path", calls)
	}
	if got, _ := os.ReadFile(filepath.Join(root, "var/lib/wsl-gpu-hook/wsl-gpu-hook")); string(got) != "hook v1" {
		t.Errorf("hook copy holds %q", got)
	}
	if changed, _ := s.Apply(); len(changed) != 0 {
		t.Errorf("second Apply with nothing new changed %q", changed)
	}
	os.WriteFile(hook, []byte("hook v2"), 0o755) // a new image
	if changed, _ := s.Apply(); !reflect.DeepEqual(changed, []string{"installed /var/lib/wsl-gpu-hook/wsl-gpu-hook"}) {
		t.Errorf("Apply after an upgrade changed %q", changed)
	}

	removed, err := s.Remove()
	if err != nil {
		t.Fatal(err)
	}
	if after := tree(t, root); !reflect.DeepEqual(after, before) {
		t.Errorf("after Remove the node holds\n%s\nwant\n%s\n(removed %q)", strings.Join(after, "\n"), strings.Join(before, "\n"), removed)
	}
}

func TestRemoveKeepsDirsItDidNotCreate(t *testing.T) {
	img := t.TempDir()
	hook := filepath.Join(img, "wsl-gpu-hook")
	os.WriteFile(hook, []byte("hook"), 0o755)
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "var/run/cdi"), 0o755)
	os.WriteFile(filepath.Join(root, "var/run/cdi/other.json"), []byte("{}"), 0o644)
	s := Setup{Root: root, HookDir: DefaultHookDir, CDIDir: DefaultCDIDir, Binaries: []string{hook},
		Generate: func(dir, _ string) (string, error) {
			return "", os.WriteFile(filepath.Join(dir, "nvidia.com-gpu_wsl-gpu-hook.json"), nil, 0o644)
		}}
	if _, err := s.Apply(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Remove(); err != nil {
		t.Fatal(err)
	}
	if got := tree(t, root); !reflect.DeepEqual(got, []string{"var", "var/run", "var/run/cdi", "var/run/cdi/other.json"}) {
		t.Errorf("after Remove: %q", got)
	}
}

func TestGenerateFailureSaysWhy(t *testing.T) {
	root := t.TempDir()
	s := Setup{Root: root, HookDir: DefaultHookDir, CDIDir: DefaultCDIDir,
		Generate: func(string, string) (string, error) { return "no /dev/dxg", os.ErrNotExist }}
	if _, err := s.Apply(); err == nil || !strings.Contains(err.Error(), "no /dev/dxg") {
		t.Errorf("Apply = %v, want the generator's words", err)
	}
}
