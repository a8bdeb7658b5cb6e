package lifecycle

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/kube/kubeapi"
)

const dsURL = "/apis/apps/v1/namespaces/gpu/daemonsets/wsl-gpu-hook"

// apiServer answers GET and DELETE of one DaemonSet and lists its pods,
// which disappear `podsAfter` list calls after the delete.
type apiServer struct {
	mu        sync.Mutex
	status    int    // GET's status; 200 answers ds
	ds        string // the DaemonSet's JSON
	deleted   bool
	delBody   map[string]any
	podsAfter int
	lists     int
	query     string
}

func (a *apiServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case r.URL.Path == dsURL && r.Method == http.MethodGet:
		if a.deleted || a.status == http.StatusNotFound {
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"kind":"Status","message":"daemonsets.apps \"wsl-gpu-hook\" not found"}`))
			return
		}
		if a.status != http.StatusOK {
			w.WriteHeader(a.status)
			w.Write([]byte(`{"kind":"Status","message":"Unauthorized"}`))
			return
		}
		w.Write([]byte(a.ds))
	case r.URL.Path == dsURL && r.Method == http.MethodDelete:
		body, _ := io.ReadAll(r.Body)
		json.Unmarshal(body, &a.delBody)
		a.deleted = true
		w.Write([]byte(`{}`))
	case r.URL.Path == "/api/v1/namespaces/gpu/pods" && r.Method == http.MethodGet:
		a.query = r.URL.RawQuery
		a.lists++
		if a.deleted && a.lists > a.podsAfter {
			w.Write([]byte(`{"items":[]}`))
			return
		}
		w.Write([]byte(`{"items":[{"metadata":{"name":"wsl-gpu-hook-abcde"},"spec":{"nodeName":"laptop"}}]}`))
	default:
		w.WriteHeader(http.StatusTeapot)
	}
}

func client(t *testing.T, h http.Handler) *kubeapi.Client {
	srv := httptest.NewTLSServer(h)
	t.Cleanup(srv.Close)
	return &kubeapi.Client{Server: srv.URL, Token: "tok", HTTP: srv.Client()}
}

const liveDS = `{"metadata":{"uid":"u-1"},"spec":{"selector":{"matchLabels":{"app.kubernetes.io/name":"wsl-gpu-hook","app.kubernetes.io/instance":"r"}}}}`

func TestDecide(t *testing.T) {
	for _, tc := range []struct {
		name      string
		status    int
		ds        string
		uninstall bool
		reason    string
	}{
		{"restart: the DaemonSet is there", 200, liveDS, false, "DaemonSet gpu/wsl-gpu-hook is still there (an upgrade, a restart, a drain or an eviction): keeping what is on the node for the pods that use it"},
		{"uninstall: the DaemonSet is gone", 404, "", true, "DaemonSet gpu/wsl-gpu-hook is gone: the chart is uninstalled"},
		{"uninstall: the DaemonSet is being deleted", 200, `{"metadata":{"uid":"u-1","deletionTimestamp":"2026-11-28T12:00:00Z"}}`, true, "DaemonSet gpu/wsl-gpu-hook is being deleted: the chart is uninstalled"},
		{"unknown: the token is refused", 401, "", false, "cannot tell whether the chart is uninstalled (get DaemonSet gpu/wsl-gpu-hook: 401 Unauthorized: Unauthorized): keeping what is on the node, as for a restart"},
		{"unknown: a garbled answer", 200, `{"metadata":`, false, "cannot tell whether the chart is uninstalled (get DaemonSet gpu/wsl-gpu-hook: unexpected end of JSON input): keeping what is on the node, as for a restart"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := client(t, &apiServer{status: tc.status, ds: tc.ds})
			v := Decide(context.Background(), c, "gpu", "wsl-gpu-hook")
			if v.Uninstall != tc.uninstall || v.Reason != tc.reason {
				t.Errorf("Decide = %+v, want uninstall %v, reason %q", v, tc.uninstall, tc.reason)
			}
		})
	}
	t.Run("unknown: the API server is unreachable", func(t *testing.T) {
		c := &kubeapi.Client{Server: "https://127.0.0.1:1", HTTP: &http.Client{Timeout: time.Second}}
		if v := Decide(context.Background(), c, "gpu", "wsl-gpu-hook"); v.Uninstall || !strings.HasPrefix(v.Reason, "cannot tell whether the chart is uninstalled") {
			t.Errorf("Decide = %+v, want keep", v)
		}
	})
}

func TestUninstallDeletesTheDaemonSetAndWaitsForItsPods(t *testing.T) {
	a := &apiServer{status: 200, ds: liveDS, podsAfter: 2}
	var out bytes.Buffer
	if err := Uninstall(context.Background(), client(t, a), "gpu", "wsl-gpu-hook", time.Millisecond, &out); err != nil {
		t.Fatal(err)
	}
	if !a.deleted || a.delBody["propagationPolicy"] != "Background" || a.delBody["preconditions"].(map[string]any)["uid"] != "u-1" {
		t.Errorf("delete sent %v", a.delBody)
	}
	if a.query != "labelSelector=app.kubernetes.io%2Finstance%3Dr%2Capp.kubernetes.io%2Fname%3Dwsl-gpu-hook" || a.lists != 3 {
		t.Errorf("listed pods %d times with %q", a.lists, a.query)
	}
	want := "deleted DaemonSet gpu/wsl-gpu-hook; waiting for its pods to clean their nodes\nstill stopping: wsl-gpu-hook-abcde@laptop\nevery pod of DaemonSet gpu/wsl-gpu-hook is gone\n"
	if out.String() != want {
		t.Errorf("printed\n%s\nwant\n%s", out.String(), want)
	}
}

func TestUninstallGivesUpWhenPodsOutliveTheDeadline(t *testing.T) {
	a := &apiServer{status: 200, ds: liveDS, podsAfter: 1 << 30}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := Uninstall(ctx, client(t, a), "gpu", "wsl-gpu-hook", time.Millisecond, io.Discard)
	var left *PodsLeftError
	want := "pods of DaemonSet gpu/wsl-gpu-hook still stopping: wsl-gpu-hook-abcde@laptop: their nodes keep the hook copy and the CDI specs"
	if !errors.As(err, &left) || err.Error() != want {
		t.Errorf("err = %v, want a *PodsLeftError: %s", err, want)
	}
}

func TestUninstallOfAGoneDaemonSet(t *testing.T) {
	a := &apiServer{status: 404}
	var out bytes.Buffer
	if err := Uninstall(context.Background(), client(t, a), "gpu", "wsl-gpu-hook", time.Millisecond, &out); err != nil {
		t.Fatal(err)
	}
	if a.deleted || out.String() != "DaemonSet gpu/wsl-gpu-hook is already gone: nothing to wait for\n" {
		t.Errorf("deleted %v, printed %q", a.deleted, out.String())
	}
}
