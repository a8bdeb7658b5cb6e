package mounts

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/privileged"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/devnode"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/hooklog"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/ldcache"

	// Named for its job here: this package's tests have a type fixture.
	wsltree "github.com/wsl-gpu-hook/wsl-gpu-hook/test/fixture"
)

// imageLoader is the tree line of an image's glibc loader for this machine
// (lib64/ld-linux-x86-64.so.2, lib/ld-linux-aarch64.so.1): with it the
// image counts as glibc and gets the loader cache entries.
var imageLoader = "file " + strings.TrimPrefix(ldcache.NativeLoader, "/") + " ELF"

func requireRoot(t *testing.T) {
	t.Helper()
	privileged.Require(t, "Apply makes device nodes and mounts")
}

// inPrivateMountNS runs fn on a thread in a new private mount namespace, so
// nothing a test mounts can reach the host; the thread is discarded after.
func inPrivateMountNS(t *testing.T, fn func()) {
	t.Helper()
	if err := privileged.InPrivateMountNS(func() error { fn(); return nil }); err != nil {
		t.Error(err)
	}
}

// makeTree builds a tree from fixture.Tree's lines ("dir usr/lib",
// "file etc/ld.so.cache CONTENT", "symlink usr/lib/wsl /etc",
// "char dev/dxg 1 1") and "cache P": a loader cache with one entry.
func makeTree(t *testing.T, root string, lines ...string) {
	t.Helper()
	for _, l := range lines {
		p, ok := strings.CutPrefix(l, "cache ")
		if !ok {
			wsltree.Tree(t, root, l)
			continue
		}
		data, err := ldcache.Merge(nil, []ldcache.Entry{{Key: "libold.so.1", Path: "/lib/libold.so.1", Flags: ldcache.FlagX8664Libc6}})
		if err != nil {
			t.Fatal(err)
		}
		wsltree.Tree(t, root, "file "+p)
		if err := os.WriteFile(filepath.Join(root, p), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// hostState is what must not change on the host: its mounts and the
// content of a directory tree.
func snapshot(t *testing.T, dir string) string {
	t.Helper()
	// PID 1's view is the host's: a test goroutine that unshared may have
	// run on the main thread, which /proc/self follows.
	mi, err := os.ReadFile("/proc/1/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.Write(mi)
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return nil
		}
		b.WriteString(p + " " + fi.Mode().String() + "\n")
		if fi.Mode().IsRegular() {
			data, _ := os.ReadFile(p)
			b.Write(data)
		}
		return nil
	})
	return b.String()
}

type fixture struct {
	host    string // a fake WSL host: dev node, lib dir, drivers
	rootfs  string
	outside string // a host directory hostile images aim at
	in      Inputs
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	base := t.TempDir()
	fx := &fixture{
		host:    filepath.Join(base, "host"),
		rootfs:  filepath.Join(base, "bundle", "rootfs"),
		outside: filepath.Join(base, "outside"),
	}
	makeTree(t, fx.host,
		"char dev/dxg 10 229",
		"exe usr/lib/wsl/lib/libcuda.so.1",
		"exe usr/lib/wsl/lib/nvidia-smi",
		"exe usr/lib/wsl/drivers/nv_dispi.inf_amd64_1/libcuda.so.1.1",
		"exe usr/lib/wsl/drivers/iigd_dch.inf_amd64_2/igd.dll",
	)
	makeTree(t, fx.outside, "file secret host-data")
	if err := os.MkdirAll(fx.rootfs, 0o755); err != nil {
		t.Fatal(err)
	}
	fx.in = Inputs{
		Device:     devnode.Node{Path: filepath.Join(fx.host, "dev/dxg"), Major: 10, Minor: 229},
		LibDir:     filepath.Join(fx.host, "usr/lib/wsl/lib"),
		DriversDir: filepath.Join(fx.host, "usr/lib/wsl/drivers"),
		Folders:    []string{"nv_dispi.inf_amd64_1"},
		NvidiaSmi:  "/usr/lib/wsl/lib/nvidia-smi",
		Ldcache:    []ldcache.Entry{{Key: "libcuda.so.1", Path: "/usr/lib/wsl/lib/libcuda.so.1", Flags: 0x0303}},
	}
	return fx
}

func quietLog() *hooklog.Logger { return hooklog.Discard() }

// mountedAt reports the options of the mount at p in this thread's namespace.
func mountedAt(p string) (string, bool) {
	f, err := os.Open("/proc/thread-self/mountinfo")
	if err != nil {
		return "", false
	}
	defer f.Close()
	// Every mount at p, not only the first (SingleEntryFilter stops
	// there): the last is the topmost, the one a path walk sees.
	mi, err := mountinfo.GetMountsFromReader(f, func(m *mountinfo.Info) (bool, bool) { return m.Mountpoint != p, false })
	if err != nil || len(mi) == 0 {
		return "", false
	}
	return mi[len(mi)-1].Options, true
}

// openFDs counts this process's open descriptors: Apply must close every
// one it opens, whether it succeeds or undoes itself, as a long-lived
// caller would otherwise run out. Not counted: a procfs root, which
// pathrs-lite opens once per process and keeps (its procfs handle cache).
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		var fs unix.Statfs_t
		var st unix.Stat_t
		if unix.Fstatfs(fd, &fs) == nil && fs.Type == unix.PROC_SUPER_MAGIC && unix.Fstat(fd, &st) == nil && st.Ino == 1 {
			continue
		}
		n++
	}
	return n - 1 // the directory ReadDir itself held open
}

// applyCountingFDs is Apply, failing the test if it leaves a descriptor open.
func applyCountingFDs(t *testing.T, rootfs string, steps []Step) error {
	t.Helper()
	before := openFDs(t)
	err := Apply(rootfs, steps, quietLog())
	if after := openFDs(t); after != before {
		t.Errorf("Apply left %d descriptors open (%d before, %d after)", after-before, before, after)
	}
	return err
}

func TestApply(t *testing.T) {
	requireRoot(t)
	tests := []struct {
		name    string
		image   []string // the rootfs, as tree lines; OUT is the hostile target
		inputs  func(in *Inputs)
		check   func(t *testing.T, fx *fixture)
		wantErr string // Apply fails with an error containing this
	}{
		{
			name:    "dangling /etc link to a host path fails cleanly",
			image:   []string{imageLoader, "symlink etc OUT"},
			wantErr: "file /etc/ld.so.conf.d/wsl-gpu-hook.conf: mkdir parent: ",
			check: func(t *testing.T, fx *fixture) {
				if _, ok := mountedAt(filepath.Join(fx.rootfs, "usr/lib/wsl/lib")); ok {
					t.Error("a mount survived the failed Apply")
				}
			},
		},
		{
			name:  "no /etc at all",
			image: []string{imageLoader},
			check: func(t *testing.T, fx *fixture) {
				assertFile(t, filepath.Join(fx.rootfs, LdconfFile), "/usr/lib/wsl/lib\n")
				assertLdcache(t, filepath.Join(fx.rootfs, LdcacheFile), "libcuda.so.1", "/usr/lib/wsl/lib/libcuda.so.1")
			},
		},
		{
			name:  "unreadable image cache is replaced",
			image: []string{imageLoader, "file etc/ld.so.cache garbage"},
			check: func(t *testing.T, fx *fixture) {
				assertLdcache(t, filepath.Join(fx.rootfs, LdcacheFile), "libcuda.so.1", "/usr/lib/wsl/lib/libcuda.so.1")
			},
		},
		{
			name:  "image cache entries are kept",
			image: []string{imageLoader, "cache etc/ld.so.cache"},
			check: func(t *testing.T, fx *fixture) {
				assertLdcache(t, filepath.Join(fx.rootfs, LdcacheFile), "libold.so.1", "/lib/libold.so.1")
				assertLdcache(t, filepath.Join(fx.rootfs, LdcacheFile), "libcuda.so.1", "/usr/lib/wsl/lib/libcuda.so.1")
			},
		},
		{
			name:  "glibc image",
			image: []string{"dir dev", imageLoader, "dir etc", "dir usr/bin"},
			check: func(t *testing.T, fx *fixture) {
				assertDevice(t, filepath.Join(fx.rootfs, "dev/dxg"))
				assertReadOnlyMount(t, filepath.Join(fx.rootfs, "usr/lib/wsl/lib"), "libcuda.so.1")
				assertReadOnlyMount(t, filepath.Join(fx.rootfs, "usr/lib/wsl/drivers/nv_dispi.inf_amd64_1"), "libcuda.so.1.1")
				if _, err := os.Stat(filepath.Join(fx.rootfs, "usr/lib/wsl/drivers/iigd_dch.inf_amd64_2")); err == nil {
					t.Error("an unselected driver folder is visible")
				}
				assertFile(t, filepath.Join(fx.rootfs, LdconfFile), "/usr/lib/wsl/lib\n")
				assertLdcache(t, filepath.Join(fx.rootfs, LdcacheFile), "libcuda.so.1", "/usr/lib/wsl/lib/libcuda.so.1")
				if l, _ := os.Readlink(filepath.Join(fx.rootfs, NvidiaSmiLink)); l != "/usr/lib/wsl/lib/nvidia-smi" {
					t.Errorf("nvidia-smi link = %q", l)
				}
			},
		},
		{
			name:  "static image without glibc gets device and mounts only",
			image: []string{"dir dev", "exe bin/busybox"},
			check: func(t *testing.T, fx *fixture) {
				assertDevice(t, filepath.Join(fx.rootfs, "dev/dxg"))
				assertReadOnlyMount(t, filepath.Join(fx.rootfs, "usr/lib/wsl/lib"), "libcuda.so.1")
				for _, p := range []string{LdconfFile, LdcacheFile} {
					if _, err := os.Lstat(filepath.Join(fx.rootfs, p)); err == nil {
						t.Errorf("%s written into an image without glibc", p)
					}
				}
			},
		},
		{
			name: "symlinks to host paths stay inside the rootfs",
			image: []string{
				imageLoader,
				"symlink usr/lib/wsl OUT",
				"symlink etc OUT",
				"dir OUT", // the image's own folder of that name
				"symlink dev/dxg OUT/secret",
				"symlink usr/bin/nvidia-smi OUT/secret",
			},
			check: func(t *testing.T, fx *fixture) {
				assertDevice(t, filepath.Join(fx.rootfs, "dev/dxg"))
				// The WSL folders are the hook's: the link is replaced.
				assertReadOnlyMount(t, filepath.Join(fx.rootfs, "usr/lib/wsl/lib"), "libcuda.so.1")
				// The image's /etc link is followed as the container
				// would: under the rootfs.
				assertFile(t, filepath.Join(fx.rootfs, fx.outside, "ld.so.conf.d/wsl-gpu-hook.conf"), "/usr/lib/wsl/lib\n")
			},
		},
		{
			name: "relative symlinks climbing out stay inside the rootfs",
			image: []string{
				imageLoader,
				"symlink usr ../../../../../../..",
				"symlink etc/ld.so.cache ../../../../../../../OUT/secret",
			},
			check: func(t *testing.T, fx *fixture) {
				assertReadOnlyMount(t, filepath.Join(fx.rootfs, "lib/wsl/lib"), "libcuda.so.1")
				assertLdcache(t, filepath.Join(fx.rootfs, LdcacheFile), "libcuda.so.1", "/usr/lib/wsl/lib/libcuda.so.1")
			},
		},
		{
			name: "existing targets of the wrong kind are replaced",
			image: []string{
				imageLoader,
				"char dev/dxg 1 1", // /dev/mem's numbers
				"file usr/lib/wsl/lib not-a-dir",
				"symlink usr/lib/wsl/drivers/nv_dispi.inf_amd64_1 /",
				"file etc/ld.so.conf.d/wsl-gpu-hook.conf /evil",
			},
			check: func(t *testing.T, fx *fixture) {
				assertDevice(t, filepath.Join(fx.rootfs, "dev/dxg"))
				assertReadOnlyMount(t, filepath.Join(fx.rootfs, "usr/lib/wsl/lib"), "libcuda.so.1")
				assertReadOnlyMount(t, filepath.Join(fx.rootfs, "usr/lib/wsl/drivers/nv_dispi.inf_amd64_1"), "libcuda.so.1.1")
				assertFile(t, filepath.Join(fx.rootfs, LdconfFile), "/usr/lib/wsl/lib\n")
			},
		},
		{
			name:   "user namespace: the host node is bound, not created",
			image:  []string{"dir dev", "symlink dev/dxg OUT/secret"},
			inputs: func(in *Inputs) { in.BindDevice = true },
			check: func(t *testing.T, fx *fixture) {
				p := filepath.Join(fx.rootfs, "dev/dxg")
				if _, ok := mountedAt(p); !ok {
					t.Errorf("%s is not a bind mount of the host node", p)
				}
				var got, host unix.Stat_t
				if err := unix.Lstat(p, &got); err != nil {
					t.Fatal(err)
				}
				if err := unix.Stat(fx.in.Device.Path, &host); err != nil {
					t.Fatal(err)
				}
				if got.Ino != host.Ino || got.Dev != host.Dev {
					t.Errorf("%s is not the host's node", p)
				}
			},
		},
		{
			name:  "an image's own nvidia-smi is kept",
			image: []string{"exe usr/bin/nvidia-smi"},
			check: func(t *testing.T, fx *fixture) {
				if fi, err := os.Lstat(filepath.Join(fx.rootfs, NvidiaSmiLink)); err != nil || !fi.Mode().IsRegular() {
					t.Errorf("image nvidia-smi replaced: %v %v", fi, err)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fx := newFixture(t)
			var image []string
			for _, l := range tt.image {
				image = append(image, strings.ReplaceAll(l, "OUT", fx.outside))
			}
			makeTree(t, fx.rootfs, image...)
			if tt.inputs != nil {
				tt.inputs(&fx.in)
			}
			before := snapshot(t, fx.outside)
			hostBefore := snapshot(t, fx.host)
			inPrivateMountNS(t, func() {
				err := applyCountingFDs(t, fx.rootfs, Plan(fx.in))
				switch {
				case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
					t.Errorf("Apply error = %v, want one containing %q", err, tt.wantErr)
				case tt.wantErr == "" && err != nil:
					t.Errorf("Apply: %v", err)
					return
				}
				tt.check(t, fx)
			})
			if after := snapshot(t, fx.outside); after != before {
				t.Errorf("the host changed outside the rootfs:\nbefore %s\nafter  %s", before, after)
			}
			if after := snapshot(t, fx.host); after != hostBefore {
				t.Errorf("the simulated host tree changed")
			}
		})
	}
}

// A step failing half-way leaves no mount and no file behind.
func TestApplyUndoesOnFailure(t *testing.T) {
	requireRoot(t)
	fx := newFixture(t)
	makeTree(t, fx.rootfs, imageLoader, "cache etc/ld.so.cache", "dir dev")
	old, err := os.ReadFile(filepath.Join(fx.rootfs, LdcacheFile))
	if err != nil {
		t.Fatal(err)
	}
	in := fx.in
	in.NvidiaSmi = ""
	steps := Plan(in)
	// The last step binds a folder that vanished (a driver update).
	steps = append(steps, Step{Kind: Bind, Source: filepath.Join(fx.host, "usr/lib/wsl/drivers/gone"), Target: "/usr/lib/wsl/drivers/gone"})
	inPrivateMountNS(t, func() {
		err := applyCountingFDs(t, fx.rootfs, steps)
		var merr *Error
		if !errors.As(err, &merr) || !errors.Is(err, unix.ENOENT) || merr.Target != "/usr/lib/wsl/drivers/gone" {
			t.Errorf("Apply error = %v, want a bind error for the missing folder", err)
			return
		}
		for _, p := range []string{"usr/lib/wsl/lib", "usr/lib/wsl/drivers/nv_dispi.inf_amd64_1"} {
			if _, ok := mountedAt(filepath.Join(fx.rootfs, p)); ok {
				t.Errorf("%s still mounted after a failed Apply", p)
			}
		}
		if _, err := os.Lstat(filepath.Join(fx.rootfs, "dev/dxg")); err == nil {
			t.Error("/dev/dxg left behind after a failed Apply")
		}
		if _, err := os.Lstat(filepath.Join(fx.rootfs, LdconfFile)); err == nil {
			t.Error("ld.so.conf.d entry left behind after a failed Apply")
		}
		assertFile(t, filepath.Join(fx.rootfs, LdcacheFile), string(old))
	})
}

func assertDevice(t *testing.T, p string) {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		t.Errorf("device: %v", err)
		return
	}
	if st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != unix.Mkdev(10, 229) || st.Mode&0o777 != 0o666 {
		t.Errorf("%s: mode %o rdev %d:%d, want char 10:229 0666", p, st.Mode, unix.Major(st.Rdev), unix.Minor(st.Rdev))
	}
}

func assertReadOnlyMount(t *testing.T, dir, file string) {
	t.Helper()
	opts, ok := mountedAt(dir)
	if !ok {
		t.Errorf("%s is not a mount point", dir)
		return
	}
	for _, o := range []string{"ro", "nosuid", "nodev"} {
		if !strings.Contains(","+opts+",", ","+o+",") {
			t.Errorf("%s mounted %s, want %s", dir, opts, o)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, file)); err != nil {
		t.Errorf("host file not visible: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "probe"), nil, 0o644); !errors.Is(err, unix.EROFS) {
		t.Errorf("write into %s: %v, want EROFS", dir, err)
	}
}

func assertFile(t *testing.T, p, want string) {
	t.Helper()
	got, err := os.ReadFile(p)
	if err != nil || string(got) != want {
		t.Errorf("%s = %q, %v; want %q", p, got, err, want)
	}
}

// assertLdcache checks glibc's own reader (ldconfig -p) finds key => path
// in the cache at p.
func assertLdcache(t *testing.T, p, key, path string) {
	t.Helper()
	out, err := exec.Command("ldconfig", "-p", "-C", p).CombinedOutput()
	if err != nil {
		t.Errorf("ldconfig -p -C %s: %v: %s", p, err, out)
		return
	}
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "\t"+key+" (") && strings.HasSuffix(l, " => "+path) {
			return
		}
	}
	t.Errorf("cache %s has no %s => %s:\n%s", p, key, path, out)
}

// TestApplyTwice: a second run of the hook for the same container (two
// stages, Docker's --gpus hook next to the wrapper's, a CDI hook after the
// hooks.d one) finds the GPU given and changes nothing: one mount per
// path, the loader files written once.
func TestApplyTwice(t *testing.T) {
	requireRoot(t)
	for _, bindDevice := range []bool{false, true} {
		t.Run(fmt.Sprintf("bound node %v", bindDevice), func(t *testing.T) {
			fx := newFixture(t)
			makeTree(t, fx.rootfs, "dir dev", imageLoader, "cache etc/ld.so.cache", "dir usr/bin")
			fx.in.BindDevice = bindDevice
			inPrivateMountNS(t, func() {
				if err := Apply(fx.rootfs, Plan(fx.in), quietLog()); err != nil {
					t.Fatalf("first Apply: %v", err)
				}
				first := fileIdentities(t, fx.rootfs, LdconfFile, LdcacheFile)
				if err := Apply(fx.rootfs, Plan(fx.in), quietLog()); err != nil {
					t.Fatalf("second Apply: %v", err)
				}
				for target, n := range mountCounts(t, fx.rootfs) {
					if n != 1 {
						t.Errorf("%s is mounted %d times", target, n)
					}
				}
				if second := fileIdentities(t, fx.rootfs, LdconfFile, LdcacheFile); second != first {
					t.Errorf("the loader files were written again:\nfirst  %s\nsecond %s", first, second)
				}
				assertDevice(t, filepath.Join(fx.rootfs, "dev/dxg"))
			})
		})
	}
}

// TestApplyOverWritableBind: a writable bind of the source where the hook
// mounts (not what the hook leaves) is covered by a read-only one.
func TestApplyOverWritableBind(t *testing.T) {
	requireRoot(t)
	fx := newFixture(t)
	makeTree(t, fx.rootfs, "dir dev", "dir usr/lib/wsl/lib")
	inPrivateMountNS(t, func() {
		lib := filepath.Join(fx.rootfs, "usr/lib/wsl/lib")
		if err := unix.Mount(fx.in.LibDir, lib, "", unix.MS_BIND, ""); err != nil {
			t.Fatal(err)
		}
		if err := Apply(fx.rootfs, Plan(fx.in), quietLog()); err != nil {
			t.Fatalf("Apply: %v", err)
		}
		assertReadOnlyMount(t, lib, "libcuda.so.1")
		if n := mountCounts(t, fx.rootfs)[lib]; n != 2 {
			t.Errorf("%s is mounted %d times, want the writable bind and the hook's read-only one", lib, n)
		}
	})
}

// mountCounts counts the mounts at each mount point under root in this
// thread's mount namespace.
func mountCounts(t *testing.T, root string) map[string]int {
	t.Helper()
	f, err := os.Open("/proc/thread-self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	infos, err := mountinfo.GetMountsFromReader(f, mountinfo.PrefixFilter(root))
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for _, m := range infos {
		counts[m.Mountpoint]++
	}
	return counts
}

// fileIdentities is the inode and change time of each file: a rewrite
// (rename of a temporary file) changes both.
func fileIdentities(t *testing.T, root string, paths ...string) string {
	t.Helper()
	var b strings.Builder
	for _, p := range paths {
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(root, p), &st); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s ino %d ctime %d.%09d; ", p, st.Ino, st.Ctim.Sec, st.Ctim.Nsec)
	}
	return b.String()
}
