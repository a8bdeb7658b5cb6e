package supervise

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/dxgsim/internal/dxg"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/dxgsim/internal/seccomp"
	"golang.org/x/sys/unix"
)

// receivers is how many goroutines wait for notifications. Each answers
// on its own thread with no hand-off, and a slow caller (paged out,
// traced) holds up only one of them while fifty container starts go on.
const receivers = 8

// Supervisor serves one seccomp listener.
type Supervisor struct {
	l      *seccomp.Listener
	k      *dxg.Kernel
	rdev   uint64
	stderr io.Writer
	r      *reaper

	passthrough atomic.Uint64

	mu       sync.Mutex
	idle     *sync.Cond // signalled when inFlight drops to 0
	inFlight int
	stopped  bool
	errs     int
}

// New returns a supervisor that emulates k for ioctls on character devices
// with device number rdev and prints unexpected failures to stderr.
func New(l *seccomp.Listener, k *dxg.Kernel, rdev uint64, stderr io.Writer) (*Supervisor, error) {
	r, err := newReaper(k)
	if err != nil {
		return nil, err
	}
	s := &Supervisor{l: l, k: k, rdev: rdev, stderr: stderr, r: r}
	s.idle = sync.NewCond(&s.mu)
	return s, nil
}

// Start begins serving in the background.
func (s *Supervisor) Start() {
	go func() {
		if err := s.r.run(); err != nil {
			s.fail(err)
		}
	}()
	for range receivers {
		go s.receive()
	}
}

func (s *Supervisor) receive() {
	for {
		var n seccomp.Notif
		if err := s.l.Receive(&n); err != nil {
			s.fail(err)
			return
		}
		s.mu.Lock()
		s.inFlight++
		s.mu.Unlock()
		s.handle(&n)
		s.mu.Lock()
		if s.inFlight--; s.inFlight == 0 {
			s.idle.Broadcast()
		}
		s.mu.Unlock()
	}
}

// Stop waits for the notifications being handled, then settles every
// process that still has a handle table: exited ones, and running ones
// that hold no dxg file any more, had their handles released with their
// files; running ones that still hold the device keep theirs, a leak.
// Receivers keep answering later notifications (a daemon's leftover
// children may still call) until the process exits.
func (s *Supervisor) Stop() {
	s.mu.Lock()
	for s.inFlight > 0 {
		s.idle.Wait()
	}
	s.stopped = true
	s.mu.Unlock()
	s.r.stop()
	for _, p := range s.k.Processes() {
		switch {
		case !alive(p):
			s.k.ProcessExited(p)
		case holdsNode(p.TGID, s.rdev):
			s.k.ProcessOutlived(p)
		default:
			s.k.ProcessReleased(p)
		}
	}
}

// Passthrough counts notifications answered with CONTINUE: a dxg request
// number on something that is not the simulated node.
func (s *Supervisor) Passthrough() uint64 { return s.passthrough.Load() }

// Errors counts unexpected supervisor failures (already printed).
func (s *Supervisor) Errors() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.errs
}

func (s *Supervisor) fail(err error) {
	s.mu.Lock()
	s.errs++
	stopped := s.stopped
	s.mu.Unlock()
	if !stopped {
		fmt.Fprintf(s.stderr, "dxgsim: supervisor: %v\n", err)
	}
}

func (s *Supervisor) handle(n *seccomp.Notif) {
	req, fd, tid := uint32(n.Data.Args[1]), uint32(n.Data.Args[0]), int(n.Pid)
	if dxg.RequestName(req) == "" || !isNode(tid, fd, s.rdev) {
		s.passthrough.Add(1)
		if err := s.l.Continue(n.ID); err != nil {
			s.fail(err)
		}
		return
	}
	c, err := caller(tid)
	if err == nil {
		err = s.r.watch(c.Process)
	}
	if err != nil {
		if !s.l.Valid(n.ID) {
			return // the caller died; nobody is waiting
		}
		s.fail(err)
		s.answer(n.ID, 0, unix.EIO)
		return
	}
	res := s.k.Ioctl(c, req, n.Data.Args[2], memory(tid), func() bool { return s.l.Valid(n.ID) })
	if res.Gone {
		return
	}
	s.answer(n.ID, res.Val, res.Errno)
}

func (s *Supervisor) answer(id uint64, val int64, errno unix.Errno) {
	if err := s.l.Return(id, val, errno); err != nil {
		s.fail(err)
	}
}
