package hostdelay

import (
	"slices"
	"testing"
	"time"
)

// TestWaitIsPrecise: a wait of a WSL round trip's length lasts at least
// that long and not much longer. time.Sleep fails it: it rounds a
// sub-millisecond sleep up to about 1.1 ms.
func TestWaitIsPrecise(t *testing.T) {
	for _, d := range []time.Duration{100 * time.Microsecond, 300 * time.Microsecond, 2 * time.Millisecond} {
		// Generous for a loaded machine, far below time.Sleep's ~1 ms
		// excess: the median of many waits, not one.
		const tolerance = 400 * time.Microsecond
		took := make([]time.Duration, 101)
		for i := range took {
			start := time.Now()
			Wait(d)
			took[i] = time.Since(start)
		}
		if low := slices.Min(took); low < d {
			t.Errorf("Wait(%v): a wait took %v, less than asked", d, low)
		}
		slices.Sort(took)
		if med := took[len(took)/2]; med > d+tolerance {
			t.Errorf("Wait(%v): median %v, more than %v over", d, med, tolerance)
		}
	}
}
