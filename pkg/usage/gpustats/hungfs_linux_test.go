package gpustats

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/dxcore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/privileged"
)

// hungFUSE mounts a FUSE filesystem whose server never answers (nothing
// ever reads /dev/fuse, so even FUSE_INIT waits forever: any request to
// it blocks its caller) at dir/name, in a private mount namespace on a
// thread of its own, and gives this process an O_PATH fd on its root:
// a process with a file open on a hung NFS, 9p or FUSE mount (/mnt/c on
// WSL is one). O_PATH asks the filesystem nothing; a stat through the fd
// waits for the server. Cleanup closes /dev/fuse, which aborts the
// connection (every waiting request fails with ENOTCONN), and ends the
// thread, which takes the namespace and the mount with it: nothing
// reaches the host's mounts, even if the test dies.
func hungFUSE(t *testing.T, dir, name string) {
	t.Helper()
	mnt := filepath.Join(dir, name)
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	ready := make(chan error, 1)
	release := make(chan struct{})
	var fuse, held int
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		err := func() error {
			if err := unix.Unshare(unix.CLONE_NEWNS | unix.CLONE_FS); err != nil {
				return fmt.Errorf("unshare: %w", err)
			}
			if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
				return fmt.Errorf("make / private: %w", err)
			}
			var err error
			if fuse, err = unix.Open("/dev/fuse", unix.O_RDWR|unix.O_CLOEXEC, 0); err != nil {
				return errNoFUSE{err}
			}
			if err := unix.Mount("wsl-gpu-hook-test-hung", mnt, "fuse", unix.MS_NOSUID|unix.MS_NODEV,
				"fd="+strconv.Itoa(fuse)+",rootmode=40000,user_id=0,group_id=0"); err != nil {
				return errNoFUSE{fmt.Errorf("mount fuse: %w", err)}
			}
			if held, err = unix.Open(mnt, unix.O_PATH|unix.O_CLOEXEC, 0); err != nil {
				return fmt.Errorf("open the mount O_PATH: %w", err)
			}
			return nil
		}()
		ready <- err
		<-release
	}()
	if err := <-ready; err != nil {
		unix.Close(fuse)
		close(release)
		if errors.As(err, new(errNoFUSE)) {
			t.Skipf("no FUSE here: %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() {
		unix.Close(fuse) // aborts the connection: stuck callers return
		unix.Close(held)
		close(release)
	})
}

// errNoFUSE: the kernel or the machine has no FUSE to mount.
type errNoFUSE struct{ error }

// TestScanOnAHungFilesystem: the /proc scan stat'ed every fd with an
// absolute path, so a process holding a file on a filesystem that stopped
// answering stalled it, and with it every scrape (the sampler's lock was
// held across the scan), for as long as the filesystem hung. It reads
// links (answered by procfs) and stats only what is named like the
// device, without asking the filesystem; a mountpoint named like the
// device is asked nothing either.
func TestScanOnAHungFilesystem(t *testing.T) {
	privileged.Require(t, "mounts a FUSE filesystem that never answers")
	dir := t.TempDir()
	// The device: a node named dxg, numbered as /dev/full so that it
	// opens, and few other processes hold it.
	dev := filepath.Join(dir, "dxg")
	if err := unix.Mknod(dev, unix.S_IFCHR|0o600, int(unix.Mkdev(1, 7))); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(dev)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	hung := t.TempDir()
	hungFUSE(t, hung, "files")
	hungFUSE(t, hung, "dxg") // named like the device

	type result struct {
		procs []Process
		err   error
	}
	scanned := make(chan result, 1)
	go func() {
		procs, err := DxgProcesses("/proc", dev)
		scanned <- result{procs, err}
	}()
	select {
	case r := <-scanned:
		if r.err != nil {
			t.Fatal(r.err)
		}
		if !slices.ContainsFunc(r.procs, func(p Process) bool { return p.PID == os.Getpid() }) {
			t.Errorf("this process holds %s and is not found: %+v", dev, r.procs)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the /proc scan hung on a FUSE mount that never answers")
	}

	h := &fakeHost{luids: []dxcore.LUID{{Low: 1}}, now: time.Now()}
	s, err := open(Options{Device: dev}, h.open, h.list, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	sampled := make(chan Sample, 1)
	go func() { sampled <- s.Sample() }()
	select {
	case <-sampled:
	case <-time.After(5 * time.Second):
		t.Fatal("a sample hung on a FUSE mount that never answers")
	}
}
