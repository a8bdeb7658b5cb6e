package metricsserver

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The line a command prints when its metrics cannot be served names the
// flag to fix.
func TestListenFlag(t *testing.T) {
	busy, err := Listen(Options{Addr: "127.0.0.1:0", Limits: DefaultLimits(), Log: slog.New(slog.DiscardHandler)}, registry())
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	bad := filepath.Join(t.TempDir(), "web.yml")
	if err := os.WriteFile(bad, []byte("tls_server_config: [\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		opt        Options
		flag, want string
	}{
		{Options{Addr: busy.Addr().String()}, "--metrics-listen", "address already in use: pick a free address with --metrics-listen"},
		{Options{Addr: "127.0.0.1:0", WebConfigFile: bad}, "--listen", "metrics: web configuration " + bad + ": "},
		{Options{Addr: "127.0.0.1:0", WebConfigFile: bad}, "--listen", ": fix --web-config-file"},
	} {
		tt.opt.Limits, tt.opt.Log = DefaultLimits(), slog.New(slog.DiscardHandler)
		s, err := ListenFlag(tt.opt, registry(), tt.flag)
		if err == nil {
			s.Close()
			t.Fatalf("%+v: served", tt.opt)
		}
		if !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "metrics: ") {
			t.Errorf("%v\nwant it to hold %q", err, tt.want)
		}
	}
}
