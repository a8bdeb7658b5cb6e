package kubeapi

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
)

// The token is read before every request: the kubelet rotates it.
func TestTokenIsReadForEachRequest(t *testing.T) {
	var seen []string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, r.Header.Get("Authorization"))
		w.Write([]byte(`{}`))
	}))
	defer srv.Close()
	tok := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tok, []byte("first\n"), 0o600)
	c := &Client{Server: srv.URL, TokenFile: tok, HTTP: srv.Client()}
	ctx := context.Background()
	if _, err := c.Do(ctx, "get", http.MethodGet, "/api", nil, ""); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(tok, []byte("rotated"), 0o600)
	if _, err := c.Do(ctx, "get", http.MethodGet, "/api", nil, ""); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 2 || seen[0] != "Bearer first" || seen[1] != "Bearer rotated" {
		t.Errorf("sent %q, want the token as the file held it at each request", seen)
	}
	os.Remove(tok)
	if _, err := c.Do(ctx, "get x", http.MethodGet, "/api", nil, ""); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing token file: %v", err)
	}
}

func TestStatusError(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/gone":
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"kind":"Status","message":"nodes \"x\" not found"}`))
		default:
			w.WriteHeader(http.StatusForbidden)
			w.Write([]byte("plain text"))
		}
	}))
	defer srv.Close()
	c := &Client{Server: srv.URL, Token: "t", HTTP: srv.Client()}
	_, err := c.Do(context.Background(), "get node x", http.MethodGet, "/gone", nil, "")
	if !IsNotFound(err) || err.Error() != `get node x: 404 Not Found: nodes "x" not found` {
		t.Errorf("404: %v (IsNotFound %v)", err, IsNotFound(err))
	}
	_, err = c.Do(context.Background(), "patch node x", http.MethodPatch, "/other", map[string]int{"a": 1}, "application/merge-patch+json")
	if IsNotFound(err) || err == nil || err.Error() != "patch node x: 403 Forbidden: plain text" {
		t.Errorf("403: %v", err)
	}
}

func TestPath(t *testing.T) {
	if got := Path("api", "v1", "nodes", "a/b c"); got != "/api/v1/nodes/a%2Fb%20c" {
		t.Errorf("Path = %q", got)
	}
}
