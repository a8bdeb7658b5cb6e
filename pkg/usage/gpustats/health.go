package gpustats

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/driverstore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/dxcore"
)

// HealthCheck bounds the statistics health check in time: each query is a
// round trip to the Windows host, and a host that stops answering must not
// stall the device plugin's refresh loop (and with it every pod's
// allocation). A check that outlives Timeout is abandoned, its goroutine
// left to finish when the ioctl returns, and no new one starts until it
// has.
type HealthCheck struct {
	Device  string
	Timeout time.Duration
	// check is Unhealthy; tests replace it.
	check    func(device string) (map[dxcore.LUID]error, error)
	inFlight atomic.Bool
}

// Mark is MarkUnhealthy within c.Timeout. It returns why no health was
// read (old kernel, timeout, a check still hanging); inv is then unchanged.
func (c *HealthCheck) Mark(inv *driverstore.Inventory) error {
	if inv == nil {
		return nil
	}
	if !c.inFlight.CompareAndSwap(false, true) {
		return fmt.Errorf("the previous GPU statistics check has not returned yet: the Windows host is not answering")
	}
	check := c.check
	if check == nil {
		check = Unhealthy
	}
	type result struct {
		bad map[dxcore.LUID]error
		err error
	}
	done := make(chan result, 1)
	go func() {
		defer c.inFlight.Store(false)
		bad, err := check(c.Device)
		done <- result{bad, err}
	}()
	select {
	case r := <-done:
		for i := range inv.Adapters {
			a := &inv.Adapters[i]
			if e, ok := r.bad[a.LUID]; ok && a.Err == nil {
				a.Err = e
			}
		}
		return r.err
	case <-time.After(c.Timeout):
		return fmt.Errorf("GPU statistics did not answer within %s: the Windows host is not answering; health from enumeration only", c.Timeout)
	}
}
