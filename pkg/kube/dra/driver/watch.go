package driver

import (
	"context"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Watch refreshes the devices every interval and, within a short debounce,
// whenever an entry of dirs changes (a driver update replaces a folder of
// /usr/lib/wsl/drivers), until ctx ends. A dir that cannot be watched
// leaves the interval to notice changes, and says so once.
func (d *Driver) Watch(ctx context.Context, interval time.Duration, dirs ...string) {
	events := make(chan struct{}, 1)
	if w, err := fsnotify.NewWatcher(); err != nil {
		d.cfg.Log.Warn("not watching the driver store; polling only", "err", err)
	} else {
		defer w.Close()
		for _, dir := range dirs {
			if err := w.Add(dir); err != nil {
				d.cfg.Log.Warn("not watching a dir; polling only", "dir", dir, "err", err)
			}
		}
		go func() {
			for {
				select {
				case _, ok := <-w.Events:
					if !ok {
						return
					}
					select {
					case events <- struct{}{}:
					default:
					}
				case _, ok := <-w.Errors:
					if !ok {
						return
					}
				}
			}
		}()
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-events:
			// A driver update renames several entries in a row: settle.
			select {
			case <-ctx.Done():
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
		if _, err := d.Refresh(ctx); err != nil {
			d.cfg.Log.Error(err.Error())
		}
	}
}
