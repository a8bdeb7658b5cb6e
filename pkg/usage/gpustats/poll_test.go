package gpustats

import (
	"sync"
	"testing"
	"time"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/dxcore"
)

// TestInterleavedScrapersSeeOneBusyRatio: the busy ratio was the growth
// since the previous sample, whoever took it, so two scrapers took
// turns shortening each other's window and saw different figures for
// the same engine at the same time (Prometheus and curl, two replicas).
// Sampled on the poller's own period, every reader sees the ratio over
// the last period. The engine here is busy all of the first second and
// idle after it.
func TestInterleavedScrapersSeeOneBusyRatio(t *testing.T) {
	start := time.Unix(1000, 0)
	var mu sync.Mutex
	clock := start
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	set := func(d time.Duration) { mu.Lock(); clock = start.Add(d); mu.Unlock() }
	h := &fakeHost{luids: []dxcore.LUID{{Low: 1}}, running: func() uint64 {
		return uint64(min(now().Sub(start), time.Second))
	}}
	s, err := open(Options{NoProcesses: true}, h.open, h.list, now)
	if err != nil {
		t.Fatal(err)
	}
	ticks := make(chan time.Time)
	p := poll(s, ticks)
	defer p.Stop()
	tick := func(d time.Duration) {
		set(d)
		ticks <- clock
		for deadline := time.Now().Add(2 * time.Second); !p.Sample().Time.Equal(start.Add(d)); {
			if time.Now().After(deadline) {
				t.Fatalf("no sample at %v", d)
			}
			time.Sleep(time.Millisecond)
		}
	}
	busy := func(p *Poller) (float64, bool) {
		v, ok := KindBusy(p.Sample().Adapters[0])["3d"]
		return v, ok
	}
	if v, ok := busy(p); ok {
		t.Fatalf("the baseline has a busy ratio: %v", v)
	}
	for _, period := range []struct {
		at   time.Duration
		want float64
	}{{time.Second, 1}, {2 * time.Second, 0}} {
		tick(period.at)
		// Scrapers A and B take turns within the period.
		for i, d := range []time.Duration{250, 500, 750, 900} {
			set(period.at + d*time.Millisecond)
			if v, ok := busy(p); !ok || v != period.want {
				t.Errorf("scraper %c at %v: busy %v (%v), want %v", "AB"[i%2], period.at+d*time.Millisecond, v, ok, period.want)
			}
		}
	}
}
