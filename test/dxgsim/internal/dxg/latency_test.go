package dxg

import (
	"testing"
	"time"
)

// TestHostLatency: calls the driver forwards to the host wait out the
// latency; calls the guest answers do not.
func TestHostLatency(t *testing.T) {
	const lat = 30 * time.Millisecond
	k := newKernel(t, Config{Profile: profile(t, "nvidia-laptop"), HostLatency: lat})
	m := newMemory()
	start := time.Now()
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
	if n := k.Stats().HostCalls(); n != 1 {
		t.Errorf("HostCalls = %d, want 1", n)
	}
	k.ProcessExited(alice.Process)
}
