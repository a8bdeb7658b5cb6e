package gpustats

import (
	"sync"
	"time"
)

// Poller samples on its own period and keeps the latest sample, so that a
// busy ratio is always over one period, whoever reads it and however
// often: two Prometheus replicas, or Prometheus and a person with curl,
// no longer shorten each other's window (each read used to start a new
// one). The metrics endpoint and the device plugin read through it.
type Poller struct {
	mu     sync.Mutex
	latest Sample
	stop   chan struct{}
	done   chan struct{}
}

// Poll takes a sample of s now, the baseline (it has no busy ratios),
// and another every period until Stop; a sample that takes longer than
// a period delays the next instead of piling up.
func Poll(s *Sampler, period time.Duration) *Poller {
	t := time.NewTicker(period)
	p := poll(s, t.C)
	go func() {
		<-p.done
		t.Stop()
	}()
	return p
}

func poll(s *Sampler, ticks <-chan time.Time) *Poller {
	p := &Poller{latest: s.Sample(), stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for {
			select {
			case <-p.stop:
				return
			case <-ticks:
			}
			sample := s.Sample()
			p.mu.Lock()
			p.latest = sample
			p.mu.Unlock()
		}
	}()
	return p
}

// Sample returns the latest sample; it is shared with every other
// reader, so it must not be changed.
func (p *Poller) Sample() Sample {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.latest
}

// Stop ends the polling and waits for a sample under way.
func (p *Poller) Stop() {
	close(p.stop)
	<-p.done
}
