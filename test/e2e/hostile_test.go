package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/fixture"
)

// TestHostileImages runs images built to make a root-run hook touch the
// host: links from the paths the hook writes to host directories, by
// absolute path and by climbing, files where folders belong, an image
// ldconfig that would write to the host, an image libcuda stub. For each,
// the container still gets a working GPU, and the bait directory on the
// host, the host's mounts (runBox) and the fixture stay as they were.
func TestHostileImages(t *testing.T) {
	env(t) // skips when this host cannot run containers
	bait := newBait(t)
	climb := "../../../../../../../../.." + bait
	link := func(target, name string) func(*testing.T, string) {
		return func(t *testing.T, rootfs string) {
			p := filepath.Join(rootfs, name)
			os.RemoveAll(p)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, p); err != nil {
				t.Fatal(err)
			}
		}
	}
	file := func(name, content string, mode os.FileMode) func(*testing.T, string) {
		return func(t *testing.T, rootfs string) {
			p := filepath.Join(rootfs, name)
			os.RemoveAll(p)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(content), mode); err != nil {
				t.Fatal(err)
			}
		}
	}
	tests := []struct {
		name    string
		prepare func(*testing.T, string)
		// wantErr: the container must fail to start with the hook's one
		// line containing this; "" means it must work.
		wantErr string
	}{
		{"usr-lib-wsl links to a host dir", link(bait, "usr/lib/wsl"), ""},
		{"usr-lib-wsl climbs to a host dir", link(climb, "usr/lib/wsl"), ""},
		{"usr-lib-wsl-drivers links to a host dir", link(bait, "usr/lib/wsl/drivers"), ""},
		{"usr-lib-wsl-lib links to a host dir", link(bait, "usr/lib/wsl/lib"), ""},
		// Confined to the rootfs the climbing link dangles: refused, clearly.
		{"etc-ld.so.conf.d climbs to a host dir", link(climb, "etc/ld.so.conf.d"),
			"wsl-gpu-hook: prestart: file /etc/ld.so.conf.d/wsl-gpu-hook.conf: mkdir parent: "},
		{"etc-ld.so.cache links to a host file", link(filepath.Join(bait, "secret"), "etc/ld.so.cache"), ""},
		{"usr-bin-nvidia-smi links to a host file", link(filepath.Join(bait, "secret"), "usr/bin/nvidia-smi"), ""},
		{"usr-lib-wsl is a file", file("usr/lib/wsl", "not a folder", 0o644), ""},
		{"ldconfig writes to the host", file("sbin/ldconfig", "#!/bin/sh\necho pwned > "+bait+"/pwned\n", 0o755), ""},
		{"image ships a libcuda.so.1 stub", link(filepath.Join(bait, "evil.so"), "usr/lib/x86_64-linux-gnu/libcuda.so.1"), ""},
		{"no /etc at all", func(t *testing.T, rootfs string) { os.RemoveAll(filepath.Join(rootfs, "etc")) }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := runBox(t, box{
				image:   imageDebian,
				sim:     &simulation{profile: "nvidia-laptop"},
				hook:    hookConfig,
				env:     []string{"WSL_GPU_DEVICES=all"},
				prepare: tt.prepare,
				checks: []check{
					{"dxg-open", "fsprobe open-rw /dev/dxg"},
					{"cudaprobe", "cudaprobe"},
					{"write-lib", "fsprobe create /usr/lib/wsl/lib/e2e-write-test"},
				},
			})
			checkBait(t, bait)
			if tt.wantErr != "" {
				if o.exitCode == 0 || !strings.Contains(o.stderr, tt.wantErr) || !strings.Contains(o.stderr, ": fix the image") {
					t.Fatalf("want a failed start with %q ... fix the image, got exit %d:\n%s", tt.wantErr, o.exitCode, o.stderr)
				}
				return
			}
			o.started(t)
			wantOutput(t, o, "dxg-open", "open-rw /dev/dxg: ok")
			if out := o.succeeds(t, "cudaprobe"); !strings.Contains(out, "loaded /usr/lib/wsl/lib/libcuda.so.1") || !strings.Contains(out, "cuInit(0) = 0") {
				t.Errorf("cudaprobe:\n%s", out)
			}
			if r := o.result(t, "write-lib"); r.code == 0 {
				t.Errorf("the lib dir is writable in the container: %s", r.out)
			}
		})
	}
}

// newBait makes the host directory hostile images aim at, holding one file
// whose content checkBait verifies.
func newBait(t *testing.T) string {
	t.Helper()
	bait := t.TempDir()
	if err := os.WriteFile(filepath.Join(bait, "secret"), []byte("host data\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return bait
}

// checkBait fails if anything in the host directory hostile images aim at
// was created or changed.
func checkBait(t *testing.T, bait string) {
	t.Helper()
	entries, err := os.ReadDir(bait)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != "secret" {
		t.Errorf("the host bait dir changed: %v", entries)
	}
	if data, _ := os.ReadFile(filepath.Join(bait, "secret")); string(data) != "host data\n" {
		t.Errorf("the host file behind a link changed: %q", data)
	}
}

// TestRacingSymlinks swaps /usr/lib/wsl and /etc/ld.so.conf.d between a
// directory and a link to a host bait directory as fast as it can while
// containers start (the race behind CVE-2024-0132). Whatever the timing,
// the hook works on handles inside the rootfs: the bait and the host's
// mounts never change, and each start either runs or fails with the hook's
// one line.
func TestRacingSymlinks(t *testing.T) {
	env(t)
	bait := newBait(t)
	const runs = 20
	started, failed := 0, 0
	reasons := map[string]int{} // hook lines, work dirs cut out
	for i := 0; i < runs; i++ {
		stop := make(chan struct{})
		done := make(chan struct{})
		o := runBox(t, box{
			image: imageBusybox,
			sim:   &simulation{profile: "nvidia-laptop"},
			hook:  hookConfig,
			env:   []string{"WSL_GPU_DEVICES=all"},
			prepare: func(t *testing.T, rootfs string) {
				fixture.Tree(t, rootfs, "exe lib64/ld-linux-x86-64.so.2 \x7fELF")
				go race(stop, done, bait, filepath.Join(rootfs, "usr/lib/wsl"), filepath.Join(rootfs, "etc/ld.so.conf.d"))
			},
			checks: []check{{"ran", "echo ran"}},
		})
		close(stop)
		<-done
		checkBait(t, bait)
		if o.exitCode == 0 {
			started++
			continue
		}
		got, ok := hookStderr(o.stderr)
		if !ok || strings.Count(strings.TrimSpace(got), "\n") != 0 || !strings.HasPrefix(got, "wsl-gpu-hook: ") {
			t.Errorf("run %d failed without the hook's one line:\n%s", i, o.debug())
		} else if !strings.Contains(got, ": fix the image") && !strings.Contains(got, "start the container again") {
			t.Errorf("run %d: the hook's line does not say what to do: %s", i, got)
		}
		failed++
		reasons[regexp.MustCompile(`/tmp/\S*?/rootfs`).ReplaceAllString(strings.TrimSpace(got), "ROOTFS")]++
	}
	t.Logf("%d runs under a racing swap: %d started, %d failed cleanly", runs, started, failed)
	for r, n := range reasons {
		t.Logf("%d× %s", n, r)
	}
}

// race flips each path between an empty directory and a link to bait
// until stop is closed.
func race(stop <-chan struct{}, done chan<- struct{}, bait string, paths ...string) {
	defer close(done)
	for _, p := range paths {
		os.MkdirAll(filepath.Dir(p), 0o755)
	}
	for n := 0; ; n++ {
		select {
		case <-stop:
			return
		default:
		}
		for _, p := range paths {
			if n%2 == 0 {
				os.Remove(p)
				os.Symlink(bait, p)
			} else {
				os.Remove(p)
				os.Mkdir(p, 0o755)
			}
		}
	}
}

// TestPreplacedDeviceNode runs an image whose own /dev (no runtime tmpfs)
// already has a /dev/dxg: a node with /dev/mem's numbers, or a link to a
// host file. The container must end up with the real device and the host
// file must stay as it was.
func TestPreplacedDeviceNode(t *testing.T) {
	env(t)
	bait := newBait(t)
	tests := []struct {
		name  string
		place func(t *testing.T, dev string)
	}{
		{"node with /dev/mem's numbers", func(t *testing.T, dev string) {
			if err := unix.Mknod(dev, unix.S_IFCHR|0o666, int(unix.Mkdev(1, 1))); err != nil {
				t.Fatal(err)
			}
		}},
		{"link to a host file", func(t *testing.T, dev string) {
			if err := os.Symlink(filepath.Join(bait, "secret"), dev); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := runBox(t, box{
				image:    imageBusybox,
				sim:      &simulation{profile: "nvidia-laptop"},
				hook:     hookConfig,
				env:      []string{"WSL_GPU_DEVICES=all"},
				imageDev: true,
				prepare: func(t *testing.T, rootfs string) {
					os.MkdirAll(filepath.Join(rootfs, "dev"), 0o755)
					os.Remove(filepath.Join(rootfs, "dev/dxg"))
					tt.place(t, filepath.Join(rootfs, "dev/dxg"))
				},
				checks: []check{{"node", "stat -c '%F %t:%T %a' /dev/dxg"}, {"dxg", "fsprobe open-rw /dev/dxg"}},
			})
			o.started(t)
			wantOutput(t, o, "node", "character special file a:e5 666")
			wantOutput(t, o, "dxg", "open-rw /dev/dxg: ok")
			checkBait(t, bait)
		})
	}
}

// TestHostileSystemDirs points whole system directories of a busybox image
// (which keeps its programs in /bin) at a host bait directory, by absolute
// link and by climbing, and puts a directory where the hook writes a file.
// Each start either runs with the GPU or fails with the hook's one line;
// the bait never changes.
func TestHostileSystemDirs(t *testing.T) {
	env(t)
	bait := newBait(t)
	climb := "../../../../../../../../.." + bait
	tests := []struct {
		name     string
		path     string // in the image
		link     string // its link text; "" makes it a directory
		imageDev bool
	}{
		{name: "usr absolute", path: "usr", link: bait},
		{name: "usr-lib climbing", path: "usr/lib", link: climb},
		{name: "etc absolute", path: "etc", link: bait},
		{name: "usr-bin climbing", path: "usr/bin", link: climb},
		// /dev as a link: TestDevLink.
		{name: "ld.so.cache is a directory", path: "etc/ld.so.cache"},
		{name: "dev-dxg is a directory", path: "dev/dxg", imageDev: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := runBox(t, box{
				image:    imageBusybox,
				sim:      &simulation{profile: "nvidia-laptop"},
				hook:     hookConfig,
				env:      []string{"WSL_GPU_DEVICES=all"},
				imageDev: tt.imageDev,
				prepare: func(t *testing.T, rootfs string) {
					fixture.Tree(t, rootfs, "exe lib64/ld-linux-x86-64.so.2 \x7fELF")
					p := filepath.Join(rootfs, tt.path)
					os.RemoveAll(p)
					os.MkdirAll(filepath.Dir(p), 0o755)
					var err error
					if tt.link == "" {
						err = os.Mkdir(p, 0o755)
					} else {
						err = os.Symlink(tt.link, p)
					}
					if err != nil {
						t.Fatal(err)
					}
				},
				checks: []check{{"dxg", "fsprobe open-rw /dev/dxg"}},
			})
			checkBait(t, bait)
			wantGPUOrHookLine(t, o)
		})
	}
}

// wantGPUOrHookLine passes a start whose check "dxg" opened /dev/dxg, or
// one the hook failed with its one line. Either way the hook must have run
// for this container (its plan is in its log): an image runc refuses before
// any hook runs proves nothing about the hook, and is a failure here.
func wantGPUOrHookLine(t *testing.T, o *outcome) {
	t.Helper()
	if !strings.Contains(o.hookLog, "plan:") {
		t.Fatalf("the hook never ran for this container (runc: %s): the case proves nothing about the hook\n%s", firstLine(o.stderr), o.debug())
	}
	if o.exitCode == 0 {
		wantOutput(t, o, "dxg", "open-rw /dev/dxg: ok")
		return
	}
	got, ok := hookStderr(o.stderr)
	if !ok {
		t.Fatalf("failed without the hook's line:\n%s", o.debug())
	}
	if strings.Count(strings.TrimSpace(got), "\n") != 0 || !strings.HasPrefix(got, "wsl-gpu-hook: prestart: ") {
		t.Errorf("hook stderr %q is not one line", got)
	}
	t.Logf("refused: %s", got)
}

// TestDevLink points the image's /dev at a host directory. runc 1.1.5
// itself follows such a link on the host when it creates /dev/fd,
// /dev/ptmx and /dev/std*, with or without its tmpfs on /dev, before any
// hook runs: that is runc's, so each case first runs the image without
// the hook to learn what runc alone leaves in the bait. With the hook the
// bait must hold exactly that and nothing more (no dxg, no mount), and
// the container must have a working /dev/dxg or fail with the hook's line.
func TestDevLink(t *testing.T) {
	env(t)
	for _, tt := range []struct {
		name     string
		climb    bool
		imageDev bool
	}{
		{name: "absolute, runtime tmpfs"},
		{name: "climbing, runtime tmpfs", climb: true},
		{name: "absolute, image dev", imageDev: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			run := func(hook hookMode) (*outcome, []string) {
				bait := newBait(t)
				target := bait
				if tt.climb {
					target = "../../../../../../../../.." + bait
				}
				o := runBox(t, box{
					image:    imageBusybox,
					sim:      &simulation{profile: "nvidia-laptop"},
					hook:     hook,
					env:      []string{"WSL_GPU_DEVICES=all"},
					imageDev: tt.imageDev,
					prepare: func(t *testing.T, rootfs string) {
						p := filepath.Join(rootfs, "dev")
						os.RemoveAll(p)
						if err := os.Symlink(target, p); err != nil {
							t.Fatal(err)
						}
					},
					checks: []check{{"dxg", "fsprobe open-rw /dev/dxg"}},
				})
				entries, err := os.ReadDir(bait)
				if err != nil {
					t.Fatal(err)
				}
				var names []string
				for _, e := range entries {
					names = append(names, e.Name())
				}
				if data, _ := os.ReadFile(filepath.Join(bait, "secret")); string(data) != "host data\n" {
					t.Errorf("the host file in the bait changed: %q", data)
				}
				return o, names
			}
			alone, runcAlone := run(noHook)
			if alone.exitCode != 0 {
				// Then runc stops before any hook with it too.
				t.Skipf("runc itself refuses an image whose /dev is a link, before any hook runs: %s", firstLine(alone.stderr))
			}
			o, withHook := run(hookConfig)
			if strings.Join(withHook, " ") != strings.Join(runcAlone, " ") {
				t.Errorf("the hook changed the host directory /dev links to: runc alone leaves %v, with the hook %v", runcAlone, withHook)
			}
			if len(runcAlone) > 1 {
				t.Logf("runc alone created %v in the host directory", runcAlone)
			}
			wantGPUOrHookLine(t, o)
		})
	}
}
