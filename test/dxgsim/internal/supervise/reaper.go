package supervise

import (
	"fmt"
	"sync"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/dxgsim/internal/dxg"
	"golang.org/x/sys/unix"
)

// reaper tells the kernel when a watched process exits. A pidfd becomes
// readable when its process exits, so one epoll set covers every process
// with a single thread.
type reaper struct {
	k     *dxg.Kernel
	epfd  int
	wake  int // eventfd in the set: Stop
	mu    sync.Mutex
	byFD  map[int32]dxg.Process
	known map[dxg.Process]int32
}

func newReaper(k *dxg.Kernel) (*reaper, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("create epoll for process exits: %w", err)
	}
	wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		unix.Close(epfd)
		return nil, fmt.Errorf("create eventfd: %w", err)
	}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, wake, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(wake)}); err != nil {
		unix.Close(epfd)
		unix.Close(wake)
		return nil, fmt.Errorf("watch eventfd: %w", err)
	}
	return &reaper{k: k, epfd: epfd, wake: wake, byFD: map[int32]dxg.Process{}, known: map[dxg.Process]int32{}}, nil
}

// watch starts watching p if it is not watched yet. The caller's thread
// is blocked in the notification, so p.TGID still names p.
func (r *reaper) watch(p dxg.Process) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.known[p]; ok {
		return nil
	}
	fd, err := unix.PidfdOpen(p.TGID, 0)
	if err != nil {
		return fmt.Errorf("watch pid %d: %w", p.TGID, err)
	}
	if err := unix.EpollCtl(r.epfd, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}); err != nil {
		unix.Close(fd)
		return fmt.Errorf("watch pid %d: %w", p.TGID, err)
	}
	r.byFD[int32(fd)] = p
	r.known[p] = int32(fd)
	return nil
}

// run reports exits until stop is called. Its fds are never closed: the
// set lives as long as dxgsim.
func (r *reaper) run() error {
	events := make([]unix.EpollEvent, 64)
	for {
		n, err := unix.EpollWait(r.epfd, events, -1)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("wait for process exits: %w", err)
		}
		for _, ev := range events[:n] {
			if int(ev.Fd) == r.wake {
				return nil
			}
			r.exited(ev.Fd)
		}
	}
}

func (r *reaper) exited(fd int32) {
	r.mu.Lock()
	p, ok := r.byFD[fd]
	if ok {
		delete(r.byFD, fd)
		delete(r.known, p)
		_ = unix.EpollCtl(r.epfd, unix.EPOLL_CTL_DEL, int(fd), nil)
		unix.Close(int(fd))
	}
	r.mu.Unlock()
	if ok {
		r.k.ProcessExited(p)
	}
}

func (r *reaper) stop() {
	var one [8]byte
	one[0] = 1
	_, _ = unix.Write(r.wake, one[:])
}
