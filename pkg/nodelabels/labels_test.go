package nodelabels

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/driverstore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/fixture"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/simhost"
)

func inventory(t *testing.T, profile string) *driverstore.Inventory {
	p, err := simhost.Lookup(profile)
	if err != nil {
		t.Fatal(err)
	}
	dir := fixture.Host(t, profile, fixture.Options{Stubs: true})
	inv, err := driverstore.Build(fixture.Adapters(p), driverstore.Options{LibDir: filepath.Join(dir, fixture.LibDir), DriversDir: filepath.Join(dir, fixture.DriversDir)})
	if err != nil {
		t.Fatal(err)
	}
	return inv
}

func TestLabels(t *testing.T) {
	got := Labels(inventory(t, "nvidia-laptop"))
	want := map[string]string{
		"wsl-gpu-hook.dev/wsl": "true", "wsl-gpu-hook.dev/present": "true", "wsl-gpu-hook.dev/adapters": "2",
		"wsl-gpu-hook.dev/vendors": "intel.nvidia", "wsl-gpu-hook.dev/wddm": "3.0", "wsl-gpu-hook.dev/compute-only": "false",
		"wsl-gpu-hook.dev/nvidia.count": "1", "wsl-gpu-hook.dev/nvidia.wddm": "3.0", "wsl-gpu-hook.dev/nvidia.compute-only": "false",
		"wsl-gpu-hook.dev/nvidia.driver": "nvltwi.inf_amd64_7b2a5c1c4e6f8d90",
		"wsl-gpu-hook.dev/intel.count":   "1", "wsl-gpu-hook.dev/intel.wddm": "3.0", "wsl-gpu-hook.dev/intel.compute-only": "false",
		"wsl-gpu-hook.dev/intel.driver": "iigd_dch.inf_amd64_ba2ab4a3e0e0b2ea",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("labels:\n%q\nwant\n%q", Keys(got), Keys(want))
	}
	if got := Labels(inventory(t, "intel-npu")); got["wsl-gpu-hook.dev/compute-only"] != "true" || got["wsl-gpu-hook.dev/intel.count"] != "2" {
		t.Errorf("intel-npu: %q", Keys(got))
	}
	if got := Labels(nil); !reflect.DeepEqual(got, map[string]string{"wsl-gpu-hook.dev/wsl": "true", "wsl-gpu-hook.dev/present": "false", "wsl-gpu-hook.dev/adapters": "0"}) {
		t.Errorf("no inventory: %q", Keys(got))
	}
}

// Patch sends one merge patch: the wanted labels, and null for labels of
// ours the node should lose, never for anyone else's.
func TestPatch(t *testing.T) {
	var got map[string]any
	var path, ctype, auth string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path, ctype, auth = r.Method+" "+r.URL.Path, r.Header.Get("Content-Type"), r.Header.Get("Authorization")
		body, _ := io.ReadAll(r.Body)
		json.Unmarshal(body, &got)
		if r.URL.Path == "/api/v1/nodes/forbidden" {
			w.WriteHeader(http.StatusForbidden)
			w.Write([]byte(`{"kind":"Status","message":"nodes \"forbidden\" is forbidden: User cannot patch resource"}`))
		}
	}))
	defer srv.Close()
	c := &Client{Server: srv.URL, Token: "tok", HTTP: srv.Client(), Node: "laptop"}
	err := c.Patch(context.Background(), map[string]string{Prefix + "present": "true"},
		map[string]string{Prefix + "present": "false", Prefix + "amd.count": "1", "other.io/x": "y"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"metadata": map[string]any{"labels": map[string]any{Prefix + "present": "true", Prefix + "amd.count": nil}}}
	if !reflect.DeepEqual(got, want) || path != "PATCH /api/v1/nodes/laptop" || ctype != "application/merge-patch+json" || auth != "Bearer tok" {
		t.Errorf("sent %s %s %s %v", path, ctype, auth, got)
	}
	c.Node = "forbidden"
	if err := c.Patch(context.Background(), map[string]string{}, nil); err == nil || err.Error() != `node labels: patch node forbidden: 403 Forbidden: nodes "forbidden" is forbidden: User cannot patch resource` {
		t.Errorf("forbidden: %v", err)
	}
}
