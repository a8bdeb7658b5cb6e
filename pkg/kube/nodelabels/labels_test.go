package nodelabels

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/driverstore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/kube/kubeapi"
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
	// Windows on Arm: the GPU's arm64 package names the driver, the NPU
	// counts as Qualcomm's compute-only adapter.
	snapdragon := map[string]string{
		"wsl-gpu-hook.dev/wsl": "true", "wsl-gpu-hook.dev/present": "true", "wsl-gpu-hook.dev/adapters": "2",
		"wsl-gpu-hook.dev/vendors": "qualcomm", "wsl-gpu-hook.dev/wddm": "3.1", "wsl-gpu-hook.dev/compute-only": "true",
		"wsl-gpu-hook.dev/qualcomm.count": "2", "wsl-gpu-hook.dev/qualcomm.wddm": "3.1", "wsl-gpu-hook.dev/qualcomm.compute-only": "true",
		"wsl-gpu-hook.dev/qualcomm.driver": "qcdxkmsuc8380.inf_arm64_9a0f6b4e21c3d857",
	}
	if got := Labels(inventory(t, "snapdragon-x")); !reflect.DeepEqual(got, snapdragon) {
		t.Errorf("snapdragon-x labels:\n%q\nwant\n%q", Keys(got), Keys(snapdragon))
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
	c := &Client{API: &kubeapi.Client{Server: srv.URL, Token: "tok", HTTP: srv.Client()}, Node: "laptop"}
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

func TestOurs(t *testing.T) {
	for _, k := range Keys(Labels(inventory(t, "nvidia-laptop"))) {
		k, _, _ = strings.Cut(k, "=")
		if !Ours(k) {
			t.Errorf("Ours(%q) = false for a label Labels sets", k)
		}
	}
	for _, k := range []string{"wsl-gpu-hook.dev/test-node", "wsl-gpu-hook.dev/team", "wsl-gpu-hook.dev/.count",
		"wsl-gpu-hook.dev/My.count", "wsl-gpu-hook.dev/nvidia.owner", "nvidia.com/gpu.count", "wsl", "other.io/wsl-gpu-hook.dev/wsl"} {
		if Ours(k) {
			t.Errorf("Ours(%q) = true for a label Labels never sets", k)
		}
	}
}

// RemoveAll lists the nodes and patches only those with labels of ours,
// nulling those and nothing else.
func TestRemoveAll(t *testing.T) {
	patches := map[string]map[string]any{}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/api/v1/nodes":
			w.Write([]byte(`{"items": [
  {"metadata": {"name": "laptop", "labels": {"wsl-gpu-hook.dev/wsl": "true", "wsl-gpu-hook.dev/nvidia.count": "1",
    "wsl-gpu-hook.dev/test-node": "laptop", "kubernetes.io/os": "linux"}}},
  {"metadata": {"name": "plain", "labels": {"kubernetes.io/os": "linux", "wsl-gpu-hook.dev/team": "a"}}},
  {"metadata": {"name": "denied", "labels": {"wsl-gpu-hook.dev/present": "false"}}}]}`))
		case r.Method == http.MethodPatch && r.URL.Path == "/api/v1/nodes/denied":
			w.WriteHeader(http.StatusForbidden)
			w.Write([]byte(`{"message": "no"}`))
		case r.Method == http.MethodPatch:
			var p map[string]any
			body, _ := io.ReadAll(r.Body)
			json.Unmarshal(body, &p)
			patches[r.URL.Path] = p
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	defer srv.Close()
	c := &Client{API: &kubeapi.Client{Server: srv.URL, Token: "tok", HTTP: srv.Client()}}
	removed, err := c.RemoveAll(context.Background())
	if err == nil || err.Error() != "node labels: patch node denied: 403 Forbidden: no" {
		t.Errorf("err = %v, want the denied node's patch error", err)
	}
	if want := map[string][]string{"laptop": {"wsl-gpu-hook.dev/nvidia.count", "wsl-gpu-hook.dev/wsl"}}; !reflect.DeepEqual(removed, want) {
		t.Errorf("removed %v, want %v", removed, want)
	}
	want := map[string]map[string]any{"/api/v1/nodes/laptop": {"metadata": map[string]any{"labels": map[string]any{
		"wsl-gpu-hook.dev/wsl": nil, "wsl-gpu-hook.dev/nvidia.count": nil}}}}
	if !reflect.DeepEqual(patches, want) {
		t.Errorf("patches %v, want %v", patches, want)
	}
}
