package nodeagent

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/driverstore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/kube/lifecycle"
)

// journal records what the agent did, in order.
type journal struct {
	mu     sync.Mutex
	events []string
	// kept is closed once the setup loop runs.
	kept chan struct{}
}

func (j *journal) add(e string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.events = append(j.events, e)
}

// agent is a full agent whose parts write to j; the stop is an uninstall
// when uninstall.
func agent(j *journal, uninstall bool, log *bytes.Buffer) Agent {
	return Agent{
		Keep: func(ctx context.Context) {
			j.add("setup kept")
			close(j.kept)
			<-ctx.Done()
			j.add("setup loop ended")
		},
		Remove:  func() ([]string, error) { j.add("setup removed"); return []string{"removed /opt/wsl-gpu-hook"}, nil },
		Label:   func(*driverstore.Inventory) { j.add("labelled") },
		Unlabel: func() { j.add("unlabelled") },
		Decide: func() lifecycle.Verdict {
			j.add("decided")
			if uninstall {
				return lifecycle.Verdict{Uninstall: true, Reason: "the DaemonSet is gone: uninstall"}
			}
			return lifecycle.Verdict{Reason: "the DaemonSet is there: a restart"}
		},
		Log: slog.New(slog.NewTextHandler(log, nil)),
	}
}

// serve is a plugin that lists one inventory and serves until ctx ends,
// or fails with err at once.
func serve(j *journal, err error) Serve {
	return func(ctx context.Context, onInventory func(*driverstore.Inventory)) error {
		if onInventory != nil {
			onInventory(&driverstore.Inventory{})
		}
		if err != nil {
			return err
		}
		<-ctx.Done()
		j.add("plugin stopped")
		return nil
	}
}

func TestRun(t *testing.T) {
	boom := errors.New("kubelet.sock: connection refused")
	tests := []struct {
		name      string
		uninstall bool
		serveErr  error
		want      []string
		wantLog   string
	}{
		{"a restart keeps everything", false, nil,
			[]string{"labelled", "setup loop ended", "decided"}, "stopping: the DaemonSet is there: a restart"},
		{"an uninstall removes the setup after its loop, then the labels", true, nil,
			[]string{"labelled", "setup loop ended", "decided", "setup removed", "unlabelled"}, "node cleanup: removed /opt/wsl-gpu-hook"},
		{"a failing plugin still stops the setup and decides", false, boom,
			[]string{"labelled", "setup loop ended", "decided"}, "stopping: the DaemonSet is there"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := journal{kept: make(chan struct{})}
			var log bytes.Buffer
			a := agent(&j, tt.uninstall, &log)
			ctx, cancel := context.WithCancel(context.Background())
			go func() {
				// Stop once the setup loop runs, as a SIGTERM would.
				<-j.kept
				cancel()
			}()
			err := a.Run(ctx, serve(&j, tt.serveErr))
			cancel()
			if !errors.Is(err, tt.serveErr) {
				t.Errorf("Run = %v, want %v", err, tt.serveErr)
			}
			// The plugin and the setup loop stop on the same signal, in
			// either order; the decision comes after both.
			if p, d := slices.Index(j.events, "plugin stopped"), slices.Index(j.events, "decided"); p > d {
				t.Errorf("decided before the plugin stopped: %q", j.events)
			}
			got := slices.DeleteFunc(slices.Clone(j.events), func(e string) bool { return e == "setup kept" || e == "plugin stopped" })
			if !slices.Equal(got, tt.want) {
				t.Errorf("events %q, want %q", got, tt.want)
			}
			if !strings.Contains(log.String(), tt.wantLog) {
				t.Errorf("log lacks %q:\n%s", tt.wantLog, log.String())
			}
		})
	}
}

// A plain plugin (no setup, no labels) has nothing to undo: the stop asks
// the API server nothing.
func TestRunWithNothingToUndo(t *testing.T) {
	var j journal
	var log bytes.Buffer
	a := Agent{Decide: func() lifecycle.Verdict { j.add("decided"); return lifecycle.Verdict{} }, Log: slog.New(slog.NewTextHandler(&log, nil))}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := a.Run(ctx, serve(&j, nil)); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(j.events, []string{"plugin stopped"}) {
		t.Errorf("events %q, want only the plugin's stop", j.events)
	}
}

func TestSetupOnce(t *testing.T) {
	var log bytes.Buffer
	SetupOnce(func() ([]string, error) {
		return []string{"copied wsl-gpu-hook"}, errors.New("no GPU adapters")
	}, slog.New(slog.NewTextHandler(&log, nil)))
	for _, want := range []string{`msg="node setup: copied wsl-gpu-hook"`, `msg="node setup incomplete; the plugin retries it" err="no GPU adapters"`} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("log lacks %s:\n%s", want, log.String())
		}
	}
}
