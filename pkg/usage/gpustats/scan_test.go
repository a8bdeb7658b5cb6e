package gpustats

import (
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/dxcore"
)

// TestASlowScanStallsNoSample: a /proc scan that does not return (here a
// process whose comm is a FIFO nobody writes: the read waits) used to run
// inside Sample under the sampler's lock, so that sample, every later one
// and every other call on the sampler waited with it. Now the scan runs
// beside the sampler: a sample waits for it at most scanWait, then reports
// the previous scan's processes (none yet) with a note; no second scan
// starts while it hangs; and once it returns, its result is used.
func TestASlowScanStallsNoSample(t *testing.T) {
	proc := t.TempDir()
	fd := filepath.Join(proc, "4242", "fd")
	if err := os.MkdirAll(fd, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/dev/null", filepath.Join(fd, "3")); err != nil {
		t.Fatal(err)
	}
	comm := filepath.Join(proc, "4242", "comm")
	if err := unix.Mkfifo(comm, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// A writer that opens and closes ends the stuck read with EOF.
		if w, err := os.OpenFile(comm, os.O_WRONLY|unix.O_NONBLOCK, 0); err == nil {
			w.Close()
		}
	})

	h := &fakeHost{luids: []dxcore.LUID{{Low: 1}}, now: time.Unix(1000, 0)}
	p, err := open(Options{Device: "/dev/null", ProcRoot: proc}, h.open, h.list, func() time.Time { return h.now })
	if err != nil {
		t.Fatal(err)
	}
	p.scanWait = 100 * time.Millisecond
	var scans atomic.Int32
	scan := p.scanProcs
	p.scanProcs = func() ([]Process, error) { scans.Add(1); return scan() }

	within := func(what string, d time.Duration, f func()) {
		t.Helper()
		done := make(chan struct{})
		go func() { f(); close(done) }()
		select {
		case <-done:
		case <-time.After(d):
			t.Fatalf("%s did not return within %v", what, d)
		}
	}
	var s Sample
	within("a sample while the scan hangs", 2*time.Second, func() { s = p.Sample() })
	if len(s.Adapters) != 1 || !strings.Contains(strings.Join(s.Adapters[0].Notes, "\n"), "processes: the /proc scan started 0s ago has not finished") {
		t.Errorf("notes: %q", s.Adapters[0].Notes)
	}
	within("Adapters while the scan hangs", time.Second, func() { p.Adapters() })
	h.now = h.now.Add(time.Minute)
	within("a second sample", 2*time.Second, func() { s = p.Sample() })
	if n := scans.Load(); n != 1 {
		t.Errorf("%d scans started; want one while it hangs", n)
	}

	// The stuck read ends: the scan finds the process.
	w, err := os.OpenFile(comm, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	w.WriteString("gpu-worker\n")
	w.Close()
	deadline := time.Now().Add(2 * time.Second)
	for {
		procs, _ := p.scan.last()
		if len(procs) == 1 && procs[0].Comm == "gpu-worker" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the scan's result never arrived: %+v", procs)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestDeviceNodeNames: only an fd whose path is named like the device is
// stat'ed; everything else is decided from the link procfs answers.
func TestDeviceNodeNames(t *testing.T) {
	n := deviceNode{names: []string{"node", "dxg"}}
	for _, tt := range []struct {
		link string
		want bool
	}{
		{"/dev/dxg", true},
		{"/run/sim/node", true},
		{"/dev/dxg (deleted)", true},
		{"/mnt/c/Users/me/dxg", true}, // stat'ed, without asking the filesystem
		{"/mnt/c/Users/me/notes.txt", false},
		{"/dev/dxgsim", false},
		{"socket:[4242]", false},
		{"anon_inode:[eventfd]", false},
		{"dxg", false},
	} {
		if got := n.named(tt.link); got != tt.want {
			t.Errorf("named(%q) = %v, want %v", tt.link, got, tt.want)
		}
	}
}
