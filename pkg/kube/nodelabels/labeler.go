package nodelabels

import (
	"context"
	"log/slog"
	"maps"
	"strings"
	"time"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/driverstore"
)

// Labeler keeps one node's labels in step with its adapters: the device
// plugin calls Update with each inventory it lists.
type Labeler struct {
	Client *Client
	Log    *slog.Logger
	// had is what the node carries of ours, as last patched.
	had     map[string]string
	lastErr string
}

// Update patches the node when inv's labels differ from what it last set,
// logging a failure once until it changes and retrying at the next call.
func (l *Labeler) Update(inv *driverstore.Inventory) {
	want := Labels(inv)
	if maps.Equal(want, l.had) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := l.Client.Patch(ctx, want, l.had); err != nil {
		if err.Error() != l.lastErr {
			l.Log.Warn("node labels not set; retrying every interval", "err", err)
			l.lastErr = err.Error()
		}
		return
	}
	l.lastErr = ""
	l.Log.Info("node labels set", "node", l.Client.Node, "labels", strings.Join(Keys(want), " "))
	l.had = want
}

// Remove takes the labels it set off the node: at an uninstall only (a
// restarting plugin keeps them, and sets the same again).
func (l *Labeler) Remove() {
	if len(l.had) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := l.Client.Remove(ctx, l.had); err != nil {
		l.Log.Warn("node labels left on the node; the chart's cleanup Job removes them", "err", err)
		return
	}
	l.Log.Info("node labels removed", "node", l.Client.Node)
	l.had = nil
}
