package e2e

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
)

// hostPaths are where a hook that got its mount namespace or its paths
// wrong would write on the host: the WSL paths it creates in containers,
// and the host's own loader configuration.
func hostPaths() []string {
	return []string{
		"/dev/dxg",
		"/usr/lib/wsl",
		"/etc/ld.so.conf.d/wsl-gpu-hook.conf",
		"/etc/ld.so.cache",
		"/usr/bin/nvidia-smi",
	}
}

// hostSnapshot is the part of the host a container run must not change.
type hostSnapshot struct {
	own       string            // the run's work dir
	mountinfo []string          // the test process's (the host's) mount table
	paths     map[string]string // hostPaths -> entryDigest
	fixture   map[string]string // fixture tree, by relative path
}

// snapshotHost records the host before a run whose work dir is own.
func snapshotHost(t *testing.T, fixture, own string) hostSnapshot {
	t.Helper()
	s := hostSnapshot{own: own, mountinfo: hostMounts(t, own), paths: map[string]string{}}
	for _, p := range hostPaths() {
		s.paths[p] = entryDigest(p)
	}
	if fixture != "" {
		var err error
		if s.fixture, err = treeDigest(fixture); err != nil {
			t.Fatalf("hash fixture: %v", err)
		}
	}
	return s
}

// checkHost compares the host with the snapshot taken before the run.
func (before hostSnapshot) checkHost(t *testing.T, fixture string) {
	t.Helper()
	after := snapshotHost(t, fixture, before.own)
	if added, removed := diffLines(before.mountinfo, after.mountinfo); len(added)+len(removed) > 0 {
		t.Errorf("host mount table changed (a mount leaked out of the container's namespace):\n+ %s\n- %s",
			strings.Join(added, "\n+ "), strings.Join(removed, "\n- "))
	}
	for _, p := range hostPaths() {
		if before.paths[p] != after.paths[p] {
			t.Errorf("host path %s changed: %s -> %s", p, before.paths[p], after.paths[p])
		}
	}
	if d := diffTrees(before.fixture, after.fixture); d != "" {
		t.Errorf("fixture tree %s changed:\n%s", fixture, d)
	}
}

// hostMounts returns the host's mount table without what other runs do on
// purpose: runc's own clone mounts and the mounts tests make in their own
// work dirs (a tmpfs root file system), in this run or in a concurrent
// `go test` of another checkout. Mounts in own, the run being checked,
// are kept: that is where a hook's leak would show.
func hostMounts(t *testing.T, own string) []string {
	t.Helper()
	ms, err := mountinfo.GetMounts(func(m *mountinfo.Info) (skip, stop bool) {
		return runcCloneMount(m) || otherRunMount(m.Mountpoint, own) || latencyHost(m), false
	})
	if err != nil {
		t.Fatalf("read mount table: %v", err)
	}
	lines := make([]string, 0, len(ms))
	for _, m := range ms {
		lines = append(lines, fmt.Sprintf("%d %d %d:%d %s %s %s %s - %s %s %s",
			m.ID, m.Parent, m.Major, m.Minor, m.Root, m.Mountpoint, m.Options, m.Optional, m.FSType, m.Source, m.VFSOptions))
	}
	return lines
}

// latencyHost reports a mount of test/latencyfs: the simulated 9p lib dir
// and drivers dir that pkg/host/gpuhost's probe-cache tests and bench-start
// serve, which `go test ./...` may run next to this package. No e2e host is
// served so, so no hook of a run checked here can have made one.
func latencyHost(m *mountinfo.Info) bool {
	return m.FSType == "fuse.latencyfs"
}

// scratchPrefix starts the name of every run's scratch dir in os.TempDir.
const scratchPrefix = "wsl-gpu-hook-e2e-"

// otherScratch are the work dirs of the project's other container runs
// (test/engines, make bench-start), which mount root file systems of their
// own while this run may be going on the same machine.
func otherScratch() []string {
	return []string{
		filepath.Join(os.TempDir(), scratchPrefix),
		filepath.Join(os.TempDir(), "wsl-gpu-engines-"),
		"/var/tmp/wsl-gpu-bench-start-",
	}
}

// otherRunMount reports a mount point in another run's work dir.
func otherRunMount(mountpoint, own string) bool {
	if own != "" && (mountpoint == own || strings.HasPrefix(mountpoint, own+"/")) {
		return false
	}
	for _, prefix := range otherScratch() {
		dir, base := filepath.Split(prefix)
		rel, err := filepath.Rel(dir, mountpoint)
		if err == nil && strings.HasPrefix(rel, base) && !strings.HasPrefix(rel, "..") {
			return true
		}
	}
	return false
}

// runcCloneMount reports runc's own short-lived mount: runc 1.1 protects
// its binary (CVE-2019-5736) by bind-mounting a read-only copy of itself as
// <state dir>/<id>/runc.XXXXXX in the host's namespace while a container
// starts. Parallel tests see each other's; they are not the hook's.
func runcCloneMount(m *mountinfo.Info) bool {
	return strings.HasPrefix(filepath.Base(m.Mountpoint), "runc.") && filepath.Base(m.Root) == "runc"
}

// mountsUnder lists the mount points in the host's table at or below dir,
// deepest first (the order to unmount them in).
func mountsUnder(dir string) ([]string, error) {
	ms, err := mountinfo.GetMounts(mountinfo.PrefixFilter(dir))
	if err != nil {
		return nil, err
	}
	found := make([]string, 0, len(ms))
	for _, m := range ms {
		found = append(found, m.Mountpoint)
	}
	sort.Sort(sort.Reverse(sort.StringSlice(found)))
	return found, nil
}

// removeWorkDir removes a container's work directory, first detaching
// anything mounted below it: removing through a leaked bind mount would
// delete the files it exposes (the fixture). A leak is a test failure.
func removeWorkDir(t *testing.T, dir string) {
	t.Helper()
	leaked, err := mountsUnder(dir)
	if err != nil {
		t.Errorf("read mount table: %v", err)
		return
	}
	for _, mp := range leaked {
		t.Errorf("leaked host mount %s", mp)
		if err := unix.Unmount(mp, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v; not removing %s", mp, err, dir)
			return
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Errorf("remove work dir: %v", err)
	}
}

// entryDigest describes one path: absent, its type, and a content hash for
// regular files, the target for links, the device number for nodes.
func entryDigest(path string) string {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "absent"
	}
	if err != nil {
		return "error: " + err.Error()
	}
	return describe(path, fi)
}

func describe(path string, fi fs.FileInfo) string {
	st, _ := fi.Sys().(*syscall.Stat_t)
	owner := ""
	if st != nil {
		owner = fmt.Sprintf(" %d:%d", st.Uid, st.Gid)
	}
	head := fmt.Sprintf("%s%s", fi.Mode(), owner)
	switch {
	case fi.Mode().IsRegular():
		sum, err := fileSHA256(path)
		if err != nil {
			return head + " error: " + err.Error()
		}
		return fmt.Sprintf("%s size %d sha256 %x", head, fi.Size(), sum)
	case fi.Mode()&fs.ModeSymlink != 0:
		target, err := os.Readlink(path)
		if err != nil {
			return head + " error: " + err.Error()
		}
		return head + " -> " + target
	case fi.Mode()&(fs.ModeDevice|fs.ModeCharDevice) != 0 && st != nil:
		return fmt.Sprintf("%s dev %d:%d", head, unix.Major(st.Rdev), unix.Minor(st.Rdev))
	default:
		return head
	}
}

func fileSHA256(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return nil, err
	}
	return h.Sum(nil), nil
}

// treeDigest describes every entry below root by its path relative to
// root. Times are left out: reading a file changes its atime, and the
// tests care about what is there, not when it was looked at.
func treeDigest(root string) (map[string]string, error) {
	tree := map[string]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		tree[rel] = describe(path, fi)
		return nil
	})
	return tree, err
}

// diffTrees lists what differs between two tree digests, "" if nothing.
func diffTrees(before, after map[string]string) string {
	var out []string
	for p, d := range before {
		switch a, ok := after[p]; {
		case !ok:
			out = append(out, fmt.Sprintf("removed %s (%s)", p, d))
		case a != d:
			out = append(out, fmt.Sprintf("changed %s: %s -> %s", p, d, a))
		}
	}
	for p, a := range after {
		if _, ok := before[p]; !ok {
			out = append(out, fmt.Sprintf("added %s (%s)", p, a))
		}
	}
	sort.Strings(out)
	if len(out) > 20 {
		out = append(out[:20], fmt.Sprintf("... and %d more", len(out)-20))
	}
	return strings.Join(out, "\n")
}

// diffLines reports the lines only in after (added) and only in before
// (removed), as multisets.
func diffLines(before, after []string) (added, removed []string) {
	count := map[string]int{}
	for _, l := range before {
		count[l]++
	}
	for _, l := range after {
		if count[l] > 0 {
			count[l]--
			continue
		}
		added = append(added, l)
	}
	for l, n := range count {
		for ; n > 0; n-- {
			removed = append(removed, l)
		}
	}
	sort.Strings(removed)
	return added, removed
}
