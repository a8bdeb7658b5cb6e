package hookroot

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/privileged"
)

// TestOpenRefuses: what a hook finds where runtimes other than runc and
// crun run it, on this machine's real file systems and namespaces. Each is
// refused with nothing left open.
func TestOpenRefuses(t *testing.T) {
	bundle := t.TempDir()
	link := filepath.Join(t.TempDir(), "run")
	if err := os.Symlink(bundle, link); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		path   string
		src    Source
		cwd    string
		bundle string
		want   Reason
	}{
		{name: "a plain directory", path: ".", src: WorkingDir, cwd: t.TempDir(), bundle: bundle, want: NotMountRoot},
		{name: "the bundle spelled through a symlink", path: ".", src: WorkingDir, cwd: bundle, bundle: link, want: Bundle},
		{name: "the working directory /", path: ".", src: WorkingDir, cwd: "/", bundle: bundle, want: HostRoot},
		{name: "a state root of /", path: "/", src: StateRoot, bundle: bundle, want: HostRoot},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.cwd != "" {
				t.Chdir(tt.cwd)
			}
			before := openFDs(t)
			r, err := Open(tt.path, tt.src, tt.bundle)
			var re *RefusedError
			if !errors.As(err, &re) || re.Reason != tt.want {
				r.Close()
				t.Fatalf("Open = %+v, %v; want reason %d", r, err, tt.want)
			}
			if after := openFDs(t); after != before {
				t.Errorf("a refusal left %d descriptors open", after-before)
			}
		})
	}
}

// inPid1NS is set in the test binary that TestOpenInPid1sNamespace runs
// again as pid 1's child.
const inPid1NS = "HOOKROOT_TEST_IN_PID1_NS"

// TestOpenInPid1sNamespace: a mount root (/proc) handed to a hook that runs
// in pid 1's mount namespace is refused: the runtime ran the hook outside
// the container. pid 1 is the init of a pid namespace made for the test,
// with a /proc of its own, so the test sees it whatever hides this
// machine's pid 1.
func TestOpenInPid1sNamespace(t *testing.T) {
	if os.Getenv(inPid1NS) == "" {
		privileged.Require(t, "makes a pid namespace with a /proc of its own")
		cmd := exec.Command("unshare", "--pid", "--fork", "--mount-proc", os.Args[0], "-test.run", "^TestOpenInPid1sNamespace$", "-test.v")
		cmd.Env = append(os.Environ(), inPid1NS+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestOpenInPid1sNamespace") {
			t.Fatalf("in a pid namespace of its own: %v\n%s", err, out)
		}
		return
	}
	_, err := Open("/proc", StateRoot, "/nonexistent")
	var re *RefusedError
	if !errors.As(err, &re) || re.Reason != HostMountNS {
		t.Errorf("Open(/proc) = %v, want reason HostMountNS", err)
	}
}

// TestOpenTakesARootBoundOntoItself: in a mount namespace of its own, a
// directory bound onto itself, as runc and crun prepare a root
// filesystem, is taken whichever way the hook is handed it, and the
// descriptor is that directory. Before the bind it is refused.
func TestOpenTakesARootBoundOntoItself(t *testing.T) {
	privileged.Require(t, "binds a directory in a mount namespace of its own")
	base := t.TempDir()
	rootfs, bundle := filepath.Join(base, "rootfs"), base
	if err := os.Mkdir(rootfs, 0o755); err != nil {
		t.Fatal(err)
	}
	err := privileged.InPrivateMountNS(func() error {
		var re *RefusedError
		if _, err := Open(rootfs, StateRoot, bundle); !errors.As(err, &re) || re.Reason != NotMountRoot {
			return fmt.Errorf("before the bind: %v, want reason NotMountRoot", err)
		}
		if err := unix.Mount(rootfs, rootfs, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return err
		}
		if err := unix.Chdir(rootfs); err != nil {
			return err
		}
		for _, h := range []struct {
			path string
			src  Source
		}{{".", WorkingDir}, {rootfs, StateRoot}, {rootfs, ConfigRoot}} {
			r, err := Open(h.path, h.src, bundle)
			if err != nil {
				return err
			}
			var a, b unix.Stat_t
			unix.Fstat(r.FD, &a)
			unix.Stat(rootfs, &b)
			r.Close()
			if a.Ino != b.Ino || r.Path != rootfs {
				return fmt.Errorf("%s: the descriptor or the path (%s) is not the root filesystem's", h.src, r.Path)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// openFDs counts this process's open descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}
