package dxg

import (
	"syscall"
	"testing"
	"time"
)

// stats runs one LX_DXQUERYSTATISTICS and returns the result union.
func stats(k *Kernel, c Caller, m *memory, typ, low, pid, q uint32) (Result, []byte) {
	args := m.alloc(sizeQueryStatistics)
	m.put32(args, typ)
	m.put32(args+4, low)
	m.put64(args+16, uint64(pid))
	m.put32(args+statsQueryAt, q)
	r := k.Ioctl(c, LX_DXQUERYSTATISTICS, args, m, always)
	out := make([]byte, sizeQueryStatistics-statsResultAt)
	_ = m.Read(args+statsResultAt, out)
	return r, out
}

func TestStatisticsFollowTheModelClock(t *testing.T) {
	var now time.Duration
	k := newKernel(t, Config{Profile: profile(t, "nvidia-laptop"), Clock: func() time.Duration { return now }})
	m := newMemory()
	worker := Caller{Process: Process{TGID: 4242, Start: 1}, Comm: "gpu-worker"}
	other := Caller{Process: Process{TGID: 99, Start: 1}, Comm: "bash"}
	enum3(k, worker, m, 1, 64) // the worker becomes a dxg process
	const dgpu = 0x4486d1

	r, res := stats(k, other, m, qsAdapter, dgpu, 0, 0)
	eq(t, r.Errno, 0)
	eq(t, le.Uint32(res[0:]), 2) // segments
	eq(t, le.Uint32(res[4:]), 6) // engines

	// Local segment: Windows' 300 MiB plus the worker's 2 GiB.
	_, res = stats(k, other, m, qsSegment, dgpu, 0, 0)
	eq(t, le.Uint64(res[0:]), 6<<30)
	eq(t, le.Uint64(res[16:]), 300<<20+2<<30)
	eq(t, le.Uint32(res[40:]), 0)
	_, res = stats(k, other, m, qsSegment, dgpu, 0, 1)
	eq(t, le.Uint64(res[16:]), 50<<20+256<<20)
	eq(t, le.Uint32(res[40:]), 1)

	// Compute_0 (node 4) is busy 75%; Copy (node 1) 40% for 2 s then idle.
	running := func(node uint32) time.Duration {
		_, res := stats(k, other, m, qsNode, dgpu, 0, node)
		return time.Duration(le.Uint64(res[0:]) * 100)
	}
	now = 10 * time.Second
	eq(t, running(4), 7500*time.Millisecond)
	eq(t, running(1), 2*(800*time.Millisecond)+800*time.Millisecond) // 2 full cycles + 2 s at 40%
	now = 11 * time.Second
	eq(t, running(1), 2400*time.Millisecond) // idle phase: no growth

	// Per process: the worker by pid, the caller itself by 0.
	r, res = stats(k, other, m, qsProcessSegmentGroup, dgpu, 4242, 0)
	eq(t, r.Errno, 0)
	eq(t, le.Uint64(res[16:]), 2<<30)
	_, res = stats(k, worker, m, qsProcessSegmentGroup, dgpu, 0, 1)
	eq(t, le.Uint64(res[16:]), 256<<20)
	r, _ = stats(k, other, m, qsProcessSegmentGroup, dgpu, 777, 0)
	eq(t, r.Errno, syscall.EINVAL) // not a dxg process
}

func TestStatisticsRefusals(t *testing.T) {
	tests := []struct {
		name string
		cfg  func(*Config)
		pid  uint32
		want syscall.Errno
	}{
		{"kernel without the call", func(c *Config) { c.NoStats = true }, 0, syscall.ENOTTY},
		{"kernel without the pid lookup", func(c *Config) { c.NoStatsPID = true }, 4242, syscall.EINVAL},
		{"removed adapter", func(c *Config) { c.QueryFail = []int{1} }, 0, syscall.ENODEV},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Config{Profile: profile(t, "nvidia-laptop")}
			tt.cfg(&cfg)
			k := newKernel(t, cfg)
			m := newMemory()
			c := Caller{Process: Process{TGID: 4242, Start: 1}, Comm: "gpu-worker"}
			enum3(k, c, m, 1, 64)
			r, _ := stats(k, c, m, qsProcessSegmentGroup, 0x4486d1, tt.pid, 0)
			eq(t, r.Errno, tt.want)
		})
	}
}

func TestVideoMemoryInfoIsTheCallersOwn(t *testing.T) {
	k := newKernel(t, Config{Profile: profile(t, "nvidia-laptop")})
	m := newMemory()
	c := Caller{Process: Process{TGID: 4242, Start: 1}, Comm: "gpu-worker"}
	_, _, es := enum3(k, c, m, 1, 64)
	args := m.alloc(sizeQueryVidMemInfo)
	m.put32(args+8, es[1].handle)
	r := k.Ioctl(c, LX_DXQUERYVIDEOMEMORYINFO, args, m, always)
	eq(t, r.Errno, 0)
	b := make([]byte, sizeQueryVidMemInfo)
	_ = m.Read(args, b)
	eq(t, le.Uint64(b[16:]), 5632<<20)
	eq(t, le.Uint64(b[24:]), 2<<30)
	m.put64(args, 4242) // another process: the kernel refuses
	eq(t, k.Ioctl(c, LX_DXQUERYVIDEOMEMORYINFO, args, m, always).Errno, syscall.EINVAL)
}
