package containernames

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

const (
	idA = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	idB = "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"
)

func TestKubeletLogs(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{
		"cuda-7d4b9c_ml_trainer-" + idA + ".log",
		"coredns-abc.x_kube-system_coredns-" + idB + ".log",
		"not-a-link.log",
		"a_b_c-1234.log", // a short id: not the kubelet's
	} {
		os.WriteFile(filepath.Join(dir, n), nil, 0o644)
	}
	got, err := KubeletLogs{Dir: dir}.Names(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Names{
		idA: {Namespace: "ml", Pod: "cuda-7d4b9c", Container: "trainer"},
		idB: {Namespace: "kube-system", Pod: "coredns-abc.x", Container: "coredns"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("names %v, want %v", got, want)
	}
	if n, ok := Lookup(got, idA[:12]); !ok || n.Pod != "cuda-7d4b9c" {
		t.Errorf("Lookup of a 12-digit id: %v %v", n, ok)
	}
	if _, ok := Lookup(got, idA[:8]); ok {
		t.Errorf("Lookup took an 8-digit prefix")
	}
}

func TestEngine(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "docker.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/containers/json" {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		w.Write([]byte(`[{"Id":"` + idA + `","Names":["/jupyter"]},
			{"Id":"` + idB + `","Names":["/k8s_main_p_ns_uid_0"],"Labels":{"io.kubernetes.pod.namespace":"ns","io.kubernetes.pod.name":"p","io.kubernetes.container.name":"main"}}]`))
	})}
	go srv.Serve(ln)
	defer srv.Close()
	got, err := Engine{Socket: sock}.Names(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Names{idA: {Container: "jupyter"}, idB: {Namespace: "ns", Pod: "p", Container: "main"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("names %v, want %v", got, want)
	}
}

// Sources skips a source that is not on this machine and reports one
// that is there but fails.
func TestSources(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "p_ns_c-"+idA+".log"), nil, 0o644)
	refused := filepath.Join(t.TempDir(), "stale.sock")
	ln, err := net.Listen("unix", refused)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close() // the socket file stays, nothing listens: connection refused
	got, err := Sources(context.Background(),
		KubeletLogs{Dir: dir},
		KubeletLogs{Dir: filepath.Join(dir, "missing")},
		Engine{Socket: filepath.Join(dir, "no-docker.sock")},
		Engine{Socket: refused})
	if len(got) != 1 || got[idA].Container != "c" {
		t.Errorf("names %v", got)
	}
	if err == nil || !strings.Contains(err.Error(), "stale.sock") || strings.Contains(err.Error(), "missing") || strings.Contains(err.Error(), "no-docker") {
		t.Errorf("err %v, want only the refused socket's", err)
	}
}

// TestEngineHoldsNoConnections: top lists the engine's containers at
// every scan, once a second. dockerd keeps an idle API connection open
// forever, so a listing that leaves its connection idle cost one fd in
// both processes per scan (200 listings: 11 -> 411 fds in top). However
// many listings, the engine must hold at most one of our connections and
// our fd count must stay where it was.
func TestEngineHoldsNoConnections(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "docker.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	var open atomic.Int64
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte(`[{"Id":"` + idA + `","Names":["/jupyter"]}]`))
		}),
		// dockerd's API server: no idle timeout.
		ConnState: func(_ net.Conn, s http.ConnState) {
			switch s {
			case http.StateNew:
				open.Add(1)
			case http.StateClosed, http.StateHijacked:
				open.Add(-1)
			}
		},
	}
	go srv.Serve(ln)
	defer srv.Close()
	e := Engine{Socket: sock}
	list := func() {
		t.Helper()
		if got, err := e.Names(context.Background()); err != nil || got[idA].Container != "jupyter" {
			t.Fatalf("names %v, %v", got, err)
		}
	}
	list() // the runtime's own fds (netpoll) are made once
	before := fds(t)
	const calls = 200
	for range calls {
		list()
	}
	// The server sees a close a moment after the client made it.
	deadline := time.Now().Add(2 * time.Second)
	for open.Load() > 1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	after := fds(t)
	if n := open.Load(); n > 1 {
		t.Errorf("after %d listings the engine holds %d connections of ours, want at most 1", calls, n)
	}
	// Server and client share this process: a leak is 2 fds a listing.
	if after > before+2 {
		t.Errorf("after %d listings this process has %d fds, %d before", calls, after, before)
	}
}

// fds counts this process's open file descriptors.
func fds(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}
