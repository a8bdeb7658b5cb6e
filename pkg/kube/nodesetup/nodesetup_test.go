package nodesetup

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/atomicfile"
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

// ourSpec is a spec file of kind as `cdi generate --hook` writes it for
// the default hook copy: its hooks run that copy.
func ourSpec(kind string) []byte {
	return []byte(`{"cdiVersion": "0.5.0", "kind": "` + kind + `", "devices": [{"name": "all", "containerEdits": {"hooks": [{"hookName": "createContainer", "path": "/var/lib/wsl-gpu-hook/wsl-gpu-hook"}]}}]}`)
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
	s := Setup{Owner: atomicfile.Keep, Root: root, HookDir: DefaultHookDir, CDIDir: DefaultCDIDir, Binaries: []string{hook, ctl},
		Generate: func(dir, hookPath string) (string, error) {
			calls = append(calls, dir+" "+hookPath)
			f := filepath.Join(dir, "wsl-gpu-hook.dev-gpu.json")
			if _, err := os.Stat(f); err == nil {
				return "", nil
			}
			os.WriteFile(f, ourSpec("wsl-gpu-hook.dev/gpu"), 0o644)
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
	s := Setup{Owner: atomicfile.Keep, Root: root, HookDir: DefaultHookDir, CDIDir: DefaultCDIDir, Binaries: []string{hook},
		Generate: func(dir, _ string) (string, error) {
			return "", os.WriteFile(filepath.Join(dir, "nvidia.com-gpu_wsl-gpu-hook.json"), ourSpec("nvidia.com/gpu"), 0o644)
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
	s := Setup{Owner: atomicfile.Keep, Root: root, HookDir: DefaultHookDir, CDIDir: DefaultCDIDir,
		Generate: func(string, string) (string, error) { return "no /dev/dxg", os.ErrNotExist }}
	if _, err := s.Apply(); err == nil || !strings.Contains(err.Error(), "no /dev/dxg") {
		t.Errorf("Apply = %v, want the generator's words", err)
	}
}

// Remove takes only what setup recorded: a DRA claim's spec, another
// producer's spec and a file a person put in the hook dir stay.
func TestRemoveTakesOnlyWhatSetupRecorded(t *testing.T) {
	img := t.TempDir()
	hook, ctl := filepath.Join(img, "wsl-gpu-hook"), filepath.Join(img, "wsl-gpu-ctl")
	os.WriteFile(hook, []byte("hook"), 0o755)
	os.WriteFile(ctl, []byte("ctl"), 0o755)
	root := t.TempDir()
	cdiDir := filepath.Join(root, "var/run/cdi")
	s := Setup{Owner: atomicfile.Keep, Root: root, HookDir: DefaultHookDir, CDIDir: DefaultCDIDir, Binaries: []string{hook, ctl},
		Generate: func(dir, _ string) (string, error) {
			f := filepath.Join(dir, "nvidia.com-gpu_wsl-gpu-hook.json")
			return "cdi: wrote " + f + "\n", os.WriteFile(f, ourSpec("nvidia.com/gpu"), 0o644)
		}}
	if _, err := s.Apply(); err != nil {
		t.Fatal(err)
	}
	theirs := []string{
		"var/run/cdi/wsl-gpu-hook.dev-gpu_0f5e2c1a-claim.json", // a DRA claim's spec
		"var/run/cdi/nvidia.yaml",
		"var/lib/wsl-gpu-hook/notes.txt",
	}
	for _, f := range theirs {
		os.WriteFile(filepath.Join(root, f), []byte("x"), 0o644)
	}
	removed, err := s.Remove()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"removed /var/run/cdi/nvidia.com-gpu_wsl-gpu-hook.json", "removed /var/lib/wsl-gpu-hook/wsl-gpu-hook", "removed /var/lib/wsl-gpu-hook/wsl-gpu-ctl"}
	if !reflect.DeepEqual(removed, want) {
		t.Errorf("removed %q, want %q", removed, want)
	}
	for _, f := range theirs {
		if _, err := os.Stat(filepath.Join(root, f)); err != nil {
			t.Errorf("%s, not setup's, is gone: %v", f, err)
		}
	}
	if ents, _ := os.ReadDir(cdiDir); len(ents) != 2 {
		t.Errorf("CDI dir holds %d files, want the two that are not setup's", len(ents))
	}
}

// The manifest names every file before it is written: a setup killed in
// the middle of writing leaves nothing the uninstall would not remove.
func TestManifestNamesFilesBeforeTheyAreWritten(t *testing.T) {
	img := t.TempDir()
	hook := filepath.Join(img, "wsl-gpu-hook")
	os.WriteFile(hook, []byte("hook"), 0o755)
	root := t.TempDir()
	var recorded string
	s := Setup{Owner: atomicfile.Keep, Root: root, HookDir: DefaultHookDir, CDIDir: DefaultCDIDir, Binaries: []string{hook},
		Generate: func(dir, _ string) (string, error) {
			data, _ := os.ReadFile(filepath.Join(root, DefaultHookDir, ManifestName))
			recorded = string(data)
			return "", os.ErrDeadlineExceeded // killed before it wrote anything
		}}
	s.Apply()
	for _, f := range []string{"/var/run/cdi/wsl-gpu-hook.dev-gpu.json", "/var/run/cdi/nvidia.com-gpu_wsl-gpu-hook.json",
		"/var/run/cdi/amd.com-gpu_wsl-gpu-hook.json", "/var/lib/wsl-gpu-hook/wsl-gpu-hook"} {
		if !strings.Contains(recorded, `"`+f+`"`) {
			t.Errorf("the manifest did not name %s before cdi generate ran:\n%s", f, recorded)
		}
	}
	// The specs the generator would have written, written by a later run
	// of a setup killed before it recorded anything new, still go.
	os.WriteFile(filepath.Join(root, "var/run/cdi/amd.com-gpu_wsl-gpu-hook.json"), ourSpec("amd.com/gpu"), 0o644)
	if _, err := s.Remove(); err != nil {
		t.Fatal(err)
	}
	if got := tree(t, root); len(got) != 0 {
		t.Errorf("after Remove: %q", got)
	}
}

// Versions before the manifest listed their directories in .created-dirs:
// an uninstall after an upgrade from one still removes them.
func TestRemoveReadsTheLegacyDirList(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "var/lib/wsl-gpu-hook"), 0o755)
	os.MkdirAll(filepath.Join(root, "var/run/cdi"), 0o755)
	os.WriteFile(filepath.Join(root, "var/lib/wsl-gpu-hook/.created-dirs"), []byte("/var/lib/wsl-gpu-hook\n/var/run/cdi\n"), 0o644)
	s := Setup{Owner: atomicfile.Keep, Root: root, HookDir: DefaultHookDir, CDIDir: DefaultCDIDir}
	if _, err := s.Remove(); err != nil {
		t.Fatal(err)
	}
	if got := tree(t, root); !reflect.DeepEqual(got, []string{"var", "var/lib", "var/run"}) {
		t.Errorf("after Remove: %q", got)
	}
}

func TestAGarbledManifestSaysWhatToDo(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "var/lib/wsl-gpu-hook"), 0o755)
	os.WriteFile(filepath.Join(root, "var/lib/wsl-gpu-hook", ManifestName), []byte("{"), 0o644)
	s := Setup{Owner: atomicfile.Keep, Root: root, HookDir: DefaultHookDir, CDIDir: DefaultCDIDir}
	want := "node setup: manifest /var/lib/wsl-gpu-hook/node-setup.json: unexpected end of JSON input: remove it; the next start writes it anew"
	if _, err := s.Remove(); err == nil || err.Error() != want {
		t.Errorf("Remove = %v, want %s", err, want)
	}
}

// Keep re-applies every interval, says a failure once and its end once,
// and removes nothing when it stops.
func TestKeepRemovesNothingWhenItStops(t *testing.T) {
	img := t.TempDir()
	hook := filepath.Join(img, "wsl-gpu-hook")
	os.WriteFile(hook, []byte("hook"), 0o755)
	root := t.TempDir()
	calls := 0
	// Bounded: an Apply that fails before it generates would loop on.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := Setup{Owner: atomicfile.Keep, Root: root, HookDir: DefaultHookDir, CDIDir: DefaultCDIDir, Binaries: []string{hook},
		Generate: func(dir, _ string) (string, error) {
			calls++
			switch {
			case calls <= 3:
				return "boom", errors.New("exit status 1")
			case calls == 6:
				cancel()
			}
			return "", os.WriteFile(filepath.Join(dir, "wsl-gpu-hook.dev-gpu.json"), ourSpec("wsl-gpu-hook.dev/gpu"), 0o644)
		}}
	var log bytes.Buffer
	s.Keep(ctx, time.Millisecond, slog.New(slog.NewTextHandler(&log, nil)))
	if calls != 6 {
		t.Errorf("applied %d times, want until the context ended", calls)
	}
	if n := strings.Count(log.String(), "node setup failed"); n != 1 || strings.Count(log.String(), "node setup works again") != 1 {
		t.Errorf("three failures then success logged as:\n%s", log.String())
	}
	for _, f := range []string{"var/lib/wsl-gpu-hook/wsl-gpu-hook", "var/run/cdi/wsl-gpu-hook.dev-gpu.json"} {
		if _, err := os.Stat(filepath.Join(root, f)); err != nil {
			t.Errorf("%s gone after Keep stopped: %v", f, err)
		}
	}
}
