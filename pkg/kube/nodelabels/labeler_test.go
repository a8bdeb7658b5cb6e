package nodelabels

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/kube/kubeapi"
)

// The labeler patches only when the labels change, says a failure once,
// retries it, and at Remove takes off exactly what it set.
func TestLabeler(t *testing.T) {
	var mu sync.Mutex
	var patches []map[string]any
	fail := true
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if fail {
			w.WriteHeader(http.StatusForbidden)
			w.Write([]byte(`{"message":"denied by policy"}`))
			return
		}
		var p map[string]any
		body, _ := io.ReadAll(r.Body)
		json.Unmarshal(body, &p)
		patches = append(patches, p["metadata"].(map[string]any)["labels"].(map[string]any))
	}))
	defer srv.Close()
	var log bytes.Buffer
	l := &Labeler{Client: &Client{API: &kubeapi.Client{Server: srv.URL, Token: "t", HTTP: srv.Client()}, Node: "laptop"},
		Log: slog.New(slog.NewTextHandler(&log, nil))}
	inv := inventory(t, "nvidia-laptop")

	l.Update(inv)
	l.Update(inv)
	if n := strings.Count(log.String(), "node labels not set"); n != 1 || !strings.Contains(log.String(), "denied by policy") {
		t.Errorf("two failed updates logged %d times, want once with the reason:\n%s", n, log.String())
	}
	fail = false
	l.Update(inv)
	l.Update(inv) // unchanged: no patch
	if len(patches) != 1 || patches[0][Prefix+"nvidia.count"] != "1" {
		t.Fatalf("patches %v, want one setting the labels", patches)
	}
	l.Update(nil) // the adapters cannot be listed: present=false, the vendor labels go
	if len(patches) != 2 || patches[1][Prefix+"present"] != "false" || patches[1][Prefix+"nvidia.count"] != nil {
		t.Fatalf("second patch %v", patches[len(patches)-1])
	}
	if _, ok := patches[1][Prefix+"nvidia.count"]; !ok {
		t.Errorf("second patch does not null nvidia.count: %v", patches[1])
	}
	l.Remove()
	if len(patches) != 3 {
		t.Fatalf("Remove sent %d patches", len(patches)-2)
	}
	for k, v := range patches[2] {
		if v != nil || !Ours(k) {
			t.Errorf("Remove sent %s=%v: want only nulls of labels of ours", k, v)
		}
	}
	if len(patches[2]) != 3 { // wsl, present, adapters
		t.Errorf("Remove nulled %v, want what the last patch set", patches[2])
	}
	l.Remove() // nothing left to remove
	if len(patches) != 3 {
		t.Errorf("a second Remove patched again")
	}
}
