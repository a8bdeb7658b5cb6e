package dra

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// tree lists dir's entries, "" for a missing dir.
func tree(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// RemoveAll removes every claim spec (the checkpoint's and any other of a
// claim spec's name and kind), the claims' metadata files, the checkpoint
// and its moved-aside copies, and nothing else; a corrupt checkpoint does
// not stop it.
func TestRemoveAll(t *testing.T) {
	const uid3 = "0a0b0c0d-0000-4000-8000-000000000003"
	for _, corrupt := range []bool{false, true} {
		name := "checkpoint"
		if corrupt {
			name = "corrupt checkpoint"
		}
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			cdiDir, pluginDir := filepath.Join(dir, "cdi"), filepath.Join(dir, "plugin")
			os.MkdirAll(cdiDir, 0o755)
			os.MkdirAll(pluginDir, 0o755)
			ckpt := filepath.Join(pluginDir, "checkpoint.json")
			cp := &Checkpoint{Claims: map[string]Prepared{uid1: samplePrepared(uid1), uid2: samplePrepared(uid2)}}
			if err := cp.Save(ckpt); err != nil {
				t.Fatal(err)
			}
			for _, uid := range []string{uid1, uid2, uid3} {
				data, _ := samplePrepared(uid).SpecData()
				os.WriteFile(filepath.Join(cdiDir, SpecFile(uid)), data, 0o644)
			}
			keep := map[string]string{
				"nvidia.yaml":                      "kind: nvidia.com/gpu\n",
				"wsl-gpu-hook.dev-gpu.json":        `{"kind":"wsl-gpu-hook.dev/gpu"}`,
				"nvidia.com-gpu_wsl-gpu-hook.json": `{"kind":"nvidia.com/gpu"}`,
			}
			for n, data := range keep {
				os.WriteFile(filepath.Join(cdiDir, n), []byte(data), 0o644)
			}
			meta := filepath.Join(pluginDir, "claims")
			for _, uid := range []string{uid1, uid3} {
				os.MkdirAll(filepath.Join(meta, uid), 0o755)
				os.WriteFile(MetadataFile(meta, uid, "gpu"), []byte("{}"), 0o644)
			}
			os.WriteFile(ckpt+".corrupt-20261126T040000.000000000Z", []byte("old"), 0o600)
			os.WriteFile(filepath.Join(pluginDir, "dra.sock"), nil, 0o600)
			if corrupt {
				os.WriteFile(ckpt, []byte("{"), 0o600)
			}

			if err := RemoveAll(cdiDir, meta, ckpt); err != nil {
				t.Errorf("RemoveAll = %v", err)
			}
			if got, want := tree(t, cdiDir), []string{"nvidia.com-gpu_wsl-gpu-hook.json", "nvidia.yaml", "wsl-gpu-hook.dev-gpu.json"}; !slices.Equal(got, want) {
				t.Errorf("CDI dir = %v, want %v", got, want)
			}
			for n, data := range keep {
				if got, _ := os.ReadFile(filepath.Join(cdiDir, n)); string(got) != data {
					t.Errorf("%s = %q, want it untouched", n, got)
				}
			}
			if got := tree(t, pluginDir); !slices.Equal(got, []string{"dra.sock"}) {
				t.Errorf("plugin dir = %v, want only the library's socket", got)
			}
		})
	}
	t.Run("not ours at a claim's name", func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, SpecFile(uid1))
		os.WriteFile(path, []byte(`{"kind":"nvidia.com/gpu"}`), 0o644)
		err := RemoveAll(dir, filepath.Join(dir, "claims"), filepath.Join(dir, "checkpoint.json"))
		if err == nil || err.Error() != path+" is not a gpu.wsl-gpu-hook.dev/claim spec: not removing what the driver did not write" {
			t.Errorf("RemoveAll = %v", err)
		}
		if _, err := os.Stat(path); err != nil {
			t.Errorf("a foreign file at a claim's name was removed: %v", err)
		}
	})
	t.Run("nothing there", func(t *testing.T) {
		dir := t.TempDir()
		if err := RemoveAll(filepath.Join(dir, "cdi"), filepath.Join(dir, "plugin", "claims"), filepath.Join(dir, "plugin", "checkpoint.json")); err != nil {
			t.Errorf("RemoveAll on an empty node = %v, want nil", err)
		}
	})
}
