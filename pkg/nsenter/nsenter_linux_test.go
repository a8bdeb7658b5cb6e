package nsenter

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func requireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates mount namespaces")
	}
}

// container starts a process in a mount namespace of its own in which a
// tmpfs holding the file "marker" is mounted on dir, and stops it at the
// end. On the host, dir stays empty.
func container(t testing.TB, dir string) int {
	t.Helper()
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-c",
		`mount -t tmpfs none "$1" && touch "$1/marker" && echo ready && exec sleep 1000`, "sh", dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Skipf("unshare: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "ready\n" {
		t.Fatalf("container stand-in did not start: %q %v", line, err)
	}
	return cmd.Process.Pid
}

func nsLink(t testing.TB, p string) string {
	t.Helper()
	l, err := os.Readlink(p)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

func TestInMountNS(t *testing.T) {
	requireRoot(t)
	dir := t.TempDir()
	pid := container(t, dir)
	marker := filepath.Join(dir, "marker")
	if exists(marker) {
		t.Fatal("the container's tmpfs is visible on the host: cannot test")
	}
	// A working directory other than the namespace's root, which setns
	// would leave.
	cwd := t.TempDir()
	t.Chdir(cwd)
	hostNS := nsLink(t, "/proc/thread-self/ns/mnt")
	var rootBefore unix.Stat_t
	if err := unix.Stat("/", &rootBefore); err != nil {
		t.Fatal(err)
	}

	sentinel := errors.New("sentinel")
	var inside struct {
		ns     string
		marker bool
	}
	err := InMountNS(pid, func() error {
		inside.ns = nsLink(t, "/proc/thread-self/ns/mnt")
		inside.marker = exists(marker)
		return sentinel
	})
	if !errors.Is(err, sentinel) {
		t.Errorf("InMountNS returned %v, want fn's error", err)
	}
	if want := nsLink(t, fmt.Sprintf("/proc/%d/ns/mnt", pid)); inside.ns != want || !inside.marker {
		t.Errorf("inside fn: namespace %s (want the container's %s), marker visible %v (want true)", inside.ns, want, inside.marker)
	}

	// Back home, on this goroutine and on every other.
	if got := nsLink(t, "/proc/thread-self/ns/mnt"); got != hostNS {
		t.Errorf("after InMountNS: namespace %s, want the caller's %s", got, hostNS)
	}
	if exists(marker) {
		t.Error("after InMountNS: the container's mount is still visible")
	}
	if got, err := os.Getwd(); err != nil || got != cwd {
		t.Errorf("after InMountNS: working directory %q (%v), want %q", got, err, cwd)
	}
	var rootAfter unix.Stat_t
	if err := unix.Stat("/", &rootAfter); err != nil {
		t.Fatal(err)
	}
	if rootAfter.Dev != rootBefore.Dev || rootAfter.Ino != rootBefore.Ino {
		t.Error("after InMountNS: the root directory changed")
	}
	other := make(chan string)
	go func() { other <- nsLink(t, "/proc/thread-self/ns/mnt") }()
	if got := <-other; got != hostNS {
		t.Errorf("another goroutine is in namespace %s, want %s", got, hostNS)
	}

	// Twice on one goroutine (the thread is already its own).
	if err := InMountNS(pid, func() error {
		if !exists(marker) {
			return errors.New("marker not visible on the second entry")
		}
		return nil
	}); err != nil {
		t.Error(err)
	}
	if exists(marker) {
		t.Error("after the second InMountNS: the container's mount is still visible")
	}
}

func TestInMountNSNoProcess(t *testing.T) {
	called := false
	err := InMountNS(1<<30, func() error { called = true; return nil })
	if err == nil || !strings.HasPrefix(err.Error(), "open container mount namespace: ") || called {
		t.Fatalf("error %v, fn called %v; want the open error and no call", err, called)
	}
}

// Environment of the fresh-process measurement, see TestFreshEntry.
const (
	freshPidEnv  = "NSENTER_FRESH_PID"
	freshWarmEnv = "NSENTER_FRESH_WARM" // lock a thread first
)

// TestFreshEntry is not a test. Re-executed with freshPidEnv set, the test
// binary enters and leaves that pid's mount namespace once, as a hook
// process does, and prints how long it took in nanoseconds and the page
// faults it cost.
func TestFreshEntry(t *testing.T) {
	pid, err := strconv.Atoi(os.Getenv(freshPidEnv))
	if err != nil {
		return
	}
	if os.Getenv(freshWarmEnv) != "" {
		// As in a hook that locked a thread before (its first
		// LockOSThread starts the runtime's template thread).
		runtime.LockOSThread()
		runtime.UnlockOSThread()
	}
	var before, after unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &before)
	start := time.Now()
	err = InMountNS(pid, func() error { return nil })
	d := time.Since(start)
	unix.Getrusage(unix.RUSAGE_SELF, &after)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Printf("%d %d\n", d.Nanoseconds(), after.Minflt-before.Minflt)
	os.Exit(0)
}

// BenchmarkInMountNSFresh measures the first entry in a fresh process,
// which is the only one a hook makes: each op re-executes the test binary.
// ns/op is the exec's; fresh-ns/op and faults/op are the entry's, medians.
func BenchmarkInMountNSFresh(b *testing.B) {
	b.Run("cold", func(b *testing.B) { benchFresh(b, false) })
	b.Run("warm", func(b *testing.B) { benchFresh(b, true) })
}

// benchFresh measures one entry per fresh process; warm: after a
// LockOSThread, which starts the runtime's template thread.
func benchFresh(b *testing.B, warm bool) {
	requireRoot(b)
	pid := container(b, b.TempDir())
	var ns, faults []int64
	for b.Loop() {
		cmd := exec.Command(os.Args[0], "-test.run=^TestFreshEntry$")
		cmd.Env = append(os.Environ(), freshPidEnv+"="+strconv.Itoa(pid))
		if warm {
			cmd.Env = append(cmd.Env, freshWarmEnv+"=1")
		}
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		if err != nil {
			b.Fatal(err)
		}
		var d, f int64
		if _, err := fmt.Sscan(string(out), &d, &f); err != nil {
			b.Fatalf("child printed %q", out)
		}
		ns, faults = append(ns, d), append(faults, f)
	}
	b.ReportMetric(float64(median(ns)), "fresh-ns/op")
	b.ReportMetric(float64(median(faults)), "faults/op")
}

func median(v []int64) int64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}
