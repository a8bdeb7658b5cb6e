package dxg

import (
	"slices"
	"testing"
	"time"
)

// TestHostLatency: calls the driver forwards to the host wait out the
// latency; calls the guest answers do not.
func TestHostLatency(t *testing.T) {
	const lat = 30 * time.Millisecond
	k := newKernel(t, Config{Profile: profile(t, "nvidia-laptop"), HostLatency: lat})
	m := newMemory()
	// A process's first call stands for its open of /dev/dxg, which makes
	// the driver's process object on the host.
	start := time.Now()
	if r, _, _ := enum3(k, alice, m, 1, 64); r.Errno != 0 {
		t.Fatal(r.Errno)
	}
	if d := time.Since(start); d < lat {
		t.Errorf("the first call took %v, want at least the host latency %v (the open's process object)", d, lat)
	}
	start = time.Now()
	r, _, es := enum3(k, alice, m, 1, 64)
	if d := time.Since(start); r.Errno != 0 || len(es) == 0 || d >= lat {
		t.Fatalf("ENUMADAPTERS3: %v, %d adapters, %v (guest-side: want under %v)", r.Errno, len(es), d, lat)
	}
	start = time.Now()
	if r, _ := query(k, alice, m, es[0].handle, qaiDriverVersion, make([]byte, 4)); r.Errno != 0 {
		t.Fatal(r.Errno)
	}
	if d := time.Since(start); d < lat {
		t.Errorf("QUERYADAPTERINFO took %v, want at least the host latency %v", d, lat)
	}
	if n := k.Stats().HostCalls(); n != 2 {
		t.Errorf("HostCalls = %d, want 2 (the process object, QUERYADAPTERINFO)", n)
	}
	k.ProcessExited(alice.Process)
	k.ProcessExited(alice.Process) // twice is harmless
	if st := k.Stats(); st.HostCalls() != 3 || st.ProcessesCreated != 1 || st.ProcessesDestroyed != 1 {
		t.Errorf("after exit: HostCalls = %d, processes created %d, destroyed %d; want 3, 1, 1", st.HostCalls(), st.ProcessesCreated, st.ProcessesDestroyed)
	}
}

// TestHostLatencyIsPrecise: a host call charged WSL's 100 µs takes that,
// not the millisecond time.Sleep would make of it (the benchmark's latency
// host charged ten times its documented figure that way).
func TestHostLatencyIsPrecise(t *testing.T) {
	const lat = 100 * time.Microsecond
	// The median of many calls, generous for a loaded machine and far below
	// time.Sleep's ~1 ms.
	const tolerance = 400 * time.Microsecond
	k := newKernel(t, Config{Profile: profile(t, "nvidia-laptop"), HostLatency: lat})
	defer k.ProcessExited(alice.Process)
	m := newMemory()
	r, _, es := enum3(k, alice, m, 1, 64)
	if r.Errno != 0 || len(es) == 0 {
		t.Fatalf("ENUMADAPTERS3: %v, %d adapters", r.Errno, len(es))
	}
	took := make([]time.Duration, 101)
	for i := range took {
		start := time.Now()
		if r, _ := query(k, alice, m, es[0].handle, qaiDriverVersion, make([]byte, 4)); r.Errno != 0 {
			t.Fatal(r.Errno)
		}
		took[i] = time.Since(start)
	}
	if low := slices.Min(took); low < lat {
		t.Errorf("a QUERYADAPTERINFO took %v, less than the host latency %v", low, lat)
	}
	slices.Sort(took)
	if med := took[len(took)/2]; med > lat+tolerance {
		t.Errorf("QUERYADAPTERINFO's median %v is more than %v over the host latency %v", med, tolerance, lat)
	}
}
