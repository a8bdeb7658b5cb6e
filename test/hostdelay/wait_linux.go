package hostdelay

import (
	"errors"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// Wait blocks the calling goroutine for d, to within the scheduler's
// wake-up latency (tens of microseconds on an idle machine), without
// spinning: the thread sleeps in clock_nanosleep until an absolute
// deadline, with its timer slack (50 µs by default, which the kernel may
// add to any sleep) set to the minimum. The thread stays locked meanwhile,
// so the slack set is the sleeping thread's; other goroutines run on other
// threads, as during any blocking system call.
func Wait(d time.Duration) {
	if d <= 0 {
		return
	}
	var now unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &now); err != nil {
		time.Sleep(d)
		return
	}
	deadline := unix.NsecToTimespec(now.Nano() + d.Nanoseconds())
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	// 1 ns: the least slack a thread can have (0 means the default).
	_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)
	for {
		err := unix.ClockNanosleep(unix.CLOCK_MONOTONIC, unix.TIMER_ABSTIME, &deadline, nil)
		if !errors.Is(err, unix.EINTR) {
			return
		}
	}
}
