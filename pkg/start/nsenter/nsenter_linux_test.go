package nsenter

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/privileged"

	"golang.org/x/sys/unix"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/coldrun"
)

func requireRoot(t testing.TB) {
	t.Helper()
	privileged.Require(t, "creates mount namespaces")
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

// pidEnv names the pid whose mount namespace the cold runs enter.
const pidEnv = "NSENTER_FRESH_PID"

// TestMain lets BenchmarkInMountNSFresh re-run this binary to enter and
// leave a mount namespace once and exit, as a hook process does.
func TestMain(m *testing.M) {
	coldrun.Main(map[string]coldrun.Func{"plain": freshEntry(false), "locked": freshEntry(true)})
	os.Exit(m.Run())
}

// freshEntry enters and leaves $NSENTER_FRESH_PID's mount namespace once;
// locked: after a LockOSThread, as in a hook that locked a thread before
// (its first LockOSThread starts the runtime's template thread).
func freshEntry(locked bool) coldrun.Func {
	return func() (func() error, error) {
		pid, err := strconv.Atoi(os.Getenv(pidEnv))
		if err != nil {
			return nil, err
		}
		if locked {
			runtime.LockOSThread()
			runtime.UnlockOSThread()
		}
		return func() error { return InMountNS(pid, func() error { return nil }) }, nil
	}
}

// BenchmarkInMountNSFresh measures the first entry in a fresh process,
// which is the only one a hook makes: each op re-executes the test binary
// once plain and once after a LockOSThread ("locked"). ns/op is the
// execs'; <variant>-cold-us/op and <variant>-faults/op are the entry's,
// medians.
func BenchmarkInMountNSFresh(b *testing.B) {
	requireRoot(b)
	pid := container(b, b.TempDir())
	coldrun.Bench(b, []string{"plain", "locked"}, pidEnv+"="+strconv.Itoa(pid))
}
