package nodeagent

import (
	"context"
	"log/slog"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/driverstore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/kube/lifecycle"
)

// Agent is what a node agent keeps and may undo. Each part is optional:
// nil leaves it out.
type Agent struct {
	// Keep keeps the node setup current until its context ends
	// (nodesetup.Setup.Keep); Remove undoes it at an uninstall.
	Keep   func(ctx context.Context)
	Remove func() ([]string, error)
	// Label sets the node's labels for an inventory (nodelabels.Labeler
	// Update); Unlabel takes them off at an uninstall.
	Label   func(*driverstore.Inventory)
	Unlabel func()
	// Decide says, at the stop, whether it is an uninstall
	// (lifecycle.DecideInCluster).
	Decide func() lifecycle.Verdict
	Log    *slog.Logger
}

// Serve is the device plugin's run: it serves until ctx ends or it fails,
// calling onInventory (nil for none) with each inventory it lists.
type Serve func(ctx context.Context, onInventory func(*driverstore.Inventory)) error

// Run keeps the setup while serve runs, and when serve returns (ctx ended
// or it failed) stops the setup loop, asks Decide once and, at an
// uninstall, removes the setup and then the labels. It returns serve's
// error. Without a setup or labels there is nothing to undo: Decide is not
// asked.
func (a Agent) Run(ctx context.Context, serve Serve) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	if a.Keep != nil {
		go func() {
			defer close(done)
			a.Keep(ctx)
		}()
	} else {
		close(done)
	}
	err := serve(ctx, a.Label)
	cancel()
	<-done
	if a.Keep == nil && a.Label == nil {
		return err
	}
	v := a.Decide()
	a.Log.Info("stopping: " + v.Reason)
	if !v.Uninstall {
		return err
	}
	if a.Keep != nil && a.Remove != nil {
		removed, rerr := a.Remove()
		for _, r := range removed {
			a.Log.Info("node cleanup: " + r)
		}
		if rerr != nil {
			a.Log.Warn("node cleanup incomplete", "err", rerr)
		}
	}
	if a.Label != nil && a.Unlabel != nil {
		a.Unlabel()
	}
	return err
}

// SetupOnce is the chart's init container: apply the setup once, log what
// changed, and warn (not fail) when it is incomplete: a node with no usable
// GPU still runs the plugin, which then advertises nothing and says why,
// and the main container retries the setup every interval.
func SetupOnce(apply func() ([]string, error), log *slog.Logger) {
	changed, err := apply()
	for _, c := range changed {
		log.Info("node setup: " + c)
	}
	if err != nil {
		log.Warn("node setup incomplete; the plugin retries it", "err", err)
	}
}
