package gpustats

import (
	"fmt"
	"sync"
	"time"
)

// procScan runs the /proc scan beside the sampler: one at a time, never
// under the sampler's lock, and a caller waits for it only so long. A
// scan that never returns holds only its own goroutine.
type procScan struct {
	mu      sync.Mutex
	procs   []Process
	err     error
	done    bool      // a scan has finished
	started time.Time // when the last scan started
	// running is closed when the scan under way ends; nil when none is.
	running chan struct{}
}

// get starts a scan when none runs and the last one started every or
// more ago (or none ever did), waits up to wait for a scan under way, and
// returns the newest finished scan's result; while one is still under
// way, the error says so.
func (s *procScan) get(now time.Time, every, wait time.Duration, scan func() ([]Process, error)) ([]Process, error) {
	s.mu.Lock()
	if s.running == nil && (s.started.IsZero() || now.Sub(s.started) >= every) {
		running := make(chan struct{})
		s.running, s.started = running, now
		go func() {
			procs, err := scan()
			s.mu.Lock()
			s.procs, s.err, s.done, s.running = procs, err, true, nil
			s.mu.Unlock()
			close(running)
		}()
	}
	running := s.running
	s.mu.Unlock()
	if running != nil {
		timer := time.NewTimer(wait)
		select {
		case <-running:
		case <-timer.C:
		}
		timer.Stop()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running == nil {
		return s.procs, s.err
	}
	what := "no processes yet"
	if s.done {
		what = "processes are the previous scan's"
	}
	late := fmt.Errorf("the /proc scan started %s ago has not finished (a process's fd on a hung filesystem?): %s",
		now.Sub(s.started).Round(time.Second), what)
	if s.err != nil {
		return s.procs, fmt.Errorf("%w; %w", late, s.err)
	}
	return s.procs, late
}

// last is the newest finished scan's result.
func (s *procScan) last() ([]Process, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.procs, s.err
}
