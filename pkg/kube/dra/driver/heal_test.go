package driver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/kube/dra"
)

const uid3 = "0a0b0c0d-0000-4000-8000-000000000003"

// Every re-list rewrites, from the checkpoint, a prepared claim's spec
// that is missing or differs, one line each, and touches no file of a
// name the checkpoint does not record: the kubelet never prepares a
// running claim again, so a spec deleted under a running pod would
// otherwise fail every restart of its containers.
func TestHealSpecs(t *testing.T) {
	e := newEnv(t)
	d := e.driver(t)
	path1, path2, spec1, spec2 := e.prepareTwo(t, d)
	// Files whose names the checkpoint does not record: another
	// producer's, and a claim spec of a claim it does not know.
	foreign := map[string]string{
		filepath.Join(e.cdiDir, "nvidia.yaml"):               "kind: nvidia.com/gpu\n",
		filepath.Join(e.cdiDir, dra.SpecFile(uid3)):          `{"kind":"gpu.wsl-gpu-hook.dev/claim","edited":true}`,
		filepath.Join(e.cdiDir, "wsl-gpu-hook.dev-gpu.json"): `{"kind":"wsl-gpu-hook.dev/gpu"}`,
	}
	for p, data := range foreign {
		os.WriteFile(p, []byte(data), 0o644)
	}
	checkForeign := func(t *testing.T) {
		t.Helper()
		for p, data := range foreign {
			if got, err := os.ReadFile(p); err != nil || string(got) != data {
				t.Errorf("%s = %q, %v; want it untouched", filepath.Base(p), got, err)
			}
		}
	}
	e.log.lines()
	ctx := context.Background()

	t.Run("deleted", func(t *testing.T) {
		os.Remove(path1)
		if _, err := d.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(path1); string(got) != string(spec1) {
			t.Errorf("spec after heal:\n%s\nwant\n%s", got, spec1)
		}
		want := `level=INFO msg="rewrote claim spec" claim=default/nv uid=` + uid1 + ` file=` + path1 + ` was=missing`
		if got := e.log.lines(); !slices.Equal(got, []string{want}) {
			t.Errorf("log = %q\nwant %q", got, want)
		}
		checkForeign(t)
	})
	t.Run("edited", func(t *testing.T) {
		os.WriteFile(path2, []byte(strings.Replace(string(spec2), "createContainer", "prestart", 1)), 0o644)
		if _, err := d.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(path2); string(got) != string(spec2) {
			t.Errorf("spec after heal:\n%s\nwant\n%s", got, spec2)
		}
		want := `level=INFO msg="rewrote claim spec" claim=default/ig uid=` + uid2 + ` file=` + path2 + ` was="not what the checkpoint holds"`
		if got := e.log.lines(); !slices.Equal(got, []string{want}) {
			t.Errorf("log = %q\nwant %q", got, want)
		}
		checkForeign(t)
	})
	t.Run("intact", func(t *testing.T) {
		before, _ := os.Stat(path1)
		if _, err := d.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		if after, _ := os.Stat(path1); !os.SameFile(before, after) {
			t.Errorf("an intact spec was rewritten")
		}
		if got := e.log.lines(); len(got) != 0 {
			t.Errorf("log = %q, want nothing", got)
		}
	})
	t.Run("cannot be written", func(t *testing.T) {
		os.Remove(path1)
		os.Mkdir(path1, 0o755)
		for range 2 {
			if _, err := d.Refresh(ctx); err != nil {
				t.Fatal(err)
			}
		}
		want := `level=ERROR msg="rewrite claim spec" claim=default/nv uid=` + uid1 + ` file=` + path1 + ` was="not a regular file" err="write CDI spec: rename `
		if got := e.log.lines(); len(got) != 1 || !strings.HasPrefix(got[0], want) {
			t.Errorf("log = %q\nwant one line %s...", got, want)
		}
		os.Remove(path1)
		if _, err := d.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(path1); string(got) != string(spec1) {
			t.Errorf("spec once writable again:\n%s", got)
		}
		e.log.lines()
	})
	t.Run("at start", func(t *testing.T) {
		os.Remove(path1)
		os.Remove(path2)
		e.driver(t)
		for p, want := range map[string][]byte{path1: spec1, path2: spec2} {
			if got, _ := os.ReadFile(p); string(got) != string(want) {
				t.Errorf("%s after a start:\n%s\nwant\n%s", filepath.Base(p), got, want)
			}
		}
		checkForeign(t)
	})
	// What a spec holds follows from the checkpoint alone, not from the
	// host as listed now: with the integrated GPU gone the NVIDIA spec
	// prepare would write now lacks the Mesa adapter variable, and the
	// spec the running pod was given still has it.
	t.Run("host changed", func(t *testing.T) {
		if !strings.Contains(string(spec1), "MESA_D3D12_DEFAULT_ADAPTER_NAME") {
			t.Fatalf("the NVIDIA spec has no Mesa variable to lose:\n%s", spec1)
		}
		e.host.set(removeAdapter(0))
		os.Remove(path1)
		if _, err := d.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(path1); string(got) != string(spec1) {
			t.Errorf("spec after heal on a changed host:\n%s\nwant\n%s", got, spec1)
		}
	})
}

// writeV1 rewrites the checkpoint as the version 1 driver wrote it: the
// same claims without their specs, shares or metadata.
func writeV1(t *testing.T, path string) {
	t.Helper()
	cp, err := dra.LoadCheckpoint(path)
	if err != nil {
		t.Fatal(err)
	}
	for uid, p := range cp.Claims {
		p.Spec, p.Metadata = nil, nil
		p.Devices = slices.Clone(p.Devices)
		for i := range p.Devices {
			p.Devices[i].ShareID, p.Devices[i].Memory = "", 0
		}
		cp.Claims[uid] = p
	}
	claims, _ := json.Marshal(cp.Claims)
	sum := sha256.Sum256(claims)
	data, _ := json.MarshalIndent(map[string]any{"version": 1, "driver": dra.DriverName, "claims": cp.Claims, "checksum": "sha256:" + hex.EncodeToString(sum[:])}, "", "  ")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// A version 1 checkpoint recorded no specs: a start records each claim's
// spec as its file holds it (what its pods were given), or, with the file
// gone, rebuilds it as a version 1 prepare wrote it, and saves the
// current version.
func TestHealVersion1(t *testing.T) {
	e := newEnv(t)
	d := e.driver(t)
	path1, path2, spec1, _ := e.prepareTwo(t, d)
	writeV1(t, e.ckpt)
	v1, err := dra.LoadCheckpoint(e.ckpt)
	if err != nil {
		t.Fatal(err)
	}
	inv, _ := e.host.list()
	rebuilt, err := dra.RebuildSpec(uid2, v1.Claims[uid2], inv, e.config().Spec)
	if err != nil {
		t.Fatal(err)
	}
	spec2, _ := rebuilt.SpecData()
	if data, _ := os.ReadFile(e.ckpt); strings.Contains(string(data), `"spec"`) || !strings.Contains(string(data), `"version": 1`) {
		t.Fatalf("not a version 1 checkpoint:\n%s", data)
	}
	before1, _ := os.Stat(path1)
	os.Remove(path2)
	e.log.lines()

	e.driver(t)
	if after1, _ := os.Stat(path1); !os.SameFile(before1, after1) {
		t.Errorf("the spec a version 1 claim's file held was rewritten")
	}
	if got, _ := os.ReadFile(path2); string(got) != string(spec2) {
		t.Errorf("rebuilt spec:\n%s\nwant\n%s", got, spec2)
	}
	want := []string{
		`level=INFO msg="checkpoint version 1: rebuilt the claim's spec for the host as listed now" claim=default/ig uid=` + uid2 + ` file=` + path2 + ` because="open ` + path2 + `: no such file or directory"`,
		`level=INFO msg="checkpoint version 1: recorded the claim's spec as its file holds it" claim=default/nv uid=` + uid1 + ` file=` + path1,
		`level=INFO msg="rewrote claim spec" claim=default/ig uid=` + uid2 + ` file=` + path2 + ` was=missing`,
	}
	got := slices.DeleteFunc(e.log.lines(), func(l string) bool { return strings.Contains(l, `msg="device available"`) })
	if !slices.Equal(got, want) {
		t.Errorf("log:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	cp, err := dra.LoadCheckpoint(e.ckpt)
	if err != nil {
		t.Fatal(err)
	}
	for uid, want := range map[string][]byte{uid1: spec1, uid2: spec2} {
		if got, err := cp.Claims[uid].SpecData(); err != nil || string(got) != string(want) {
			t.Errorf("claim %s: saved spec = %s, %v", uid, got, err)
		}
	}
	if data, _ := os.ReadFile(e.ckpt); !strings.Contains(string(data), `"version": 3`) {
		t.Errorf("checkpoint not saved as version 3:\n%s", data)
	}
}
