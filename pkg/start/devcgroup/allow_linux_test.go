package devcgroup

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/privileged"

	"github.com/moby/sys/mountinfo"
	"github.com/opencontainers/cgroups"

	// Registers cgroups.DevicesSetV2, runc's program generator: the
	// tests' oracle and their stand-in for the runtime.
	_ "github.com/opencontainers/cgroups/devices"
	devconfig "github.com/opencontainers/cgroups/devices/config"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/devnode"
)

// Environment of the probe helper process, see TestProbeHelper.
const (
	probeCgroupsEnv = "DEVCGROUP_PROBE_CGROUPS" // cgroup directories to join, one per line
	probeNodesEnv   = "DEVCGROUP_PROBE_NODES"   // device nodes to open, one per line
)

// TestProbeHelper is not a test. Re-executed with probeCgroupsEnv set, the
// test binary moves itself into the given cgroups, opens each node read-only
// (or does what probeOp reads in the line) and prints "errno<TAB>line" per
// node (errno 0: done), then exits.
func TestProbeHelper(t *testing.T) {
	cgs := os.Getenv(probeCgroupsEnv)
	if cgs == "" {
		return
	}
	for _, dir := range strings.Split(cgs, "\n") {
		// "0" moves the writing process (all its threads).
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte("0"), 0); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}
	for _, node := range strings.Split(os.Getenv(probeNodesEnv), "\n") {
		fmt.Printf("%d\t%s\n", int(probeOp(node)), node)
	}
	os.Exit(0)
}

// probe opens nodes from a fresh process inside the cgroup directories cgs
// and returns the errno of each open (0 when it succeeded).
func probe(t *testing.T, cgs []string, nodes ...string) map[string]unix.Errno {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestProbeHelper$")
	cmd.Env = append(os.Environ(),
		probeCgroupsEnv+"="+strings.Join(cgs, "\n"),
		probeNodesEnv+"="+strings.Join(nodes, "\n"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("probe: %v: %s", err, stderr.String())
	}
	got := map[string]unix.Errno{}
	s := bufio.NewScanner(bytes.NewReader(out))
	for s.Scan() {
		num, node, ok := strings.Cut(s.Text(), "\t")
		n, err := strconv.Atoi(num)
		if !ok || err != nil {
			t.Fatalf("probe printed %q", s.Text())
		}
		got[node] = unix.Errno(n)
	}
	if len(got) != len(nodes) {
		t.Fatalf("probe reported %d nodes, want %d: %q", len(got), len(nodes), out)
	}
	return got
}

// wantOpen checks that each node opened (nil) or failed with the errno given.
func wantOpen(t *testing.T, when string, got map[string]unix.Errno, want map[string]unix.Errno) {
	t.Helper()
	for node, w := range want {
		if got[node] != w {
			t.Errorf("%s: open %s: got %q, want %q", when, filepath.Base(node), errText(got[node]), errText(w))
		}
	}
}

func errText(e unix.Errno) string {
	if e == 0 {
		return "success"
	}
	return e.Error()
}

func requireRoot(t testing.TB) {
	t.Helper()
	privileged.Require(t, "creates cgroups, device nodes and BPF programs")
}

// hierarchyRoot returns where the whole v1 devices (v2: cgroup2) hierarchy
// is mounted, skipping the test if it is not.
func hierarchyRoot(t testing.TB, v2 bool) string {
	t.Helper()
	mounts, err := mountinfo.GetMounts(nil)
	if err != nil {
		t.Fatal(err)
	}
	loc, ok, err := findMount(mounts, v2, "/")
	if !ok || err != nil || loc.rel != "." {
		kind := "cgroup v1 devices hierarchy"
		if v2 {
			kind = "cgroup2 hierarchy"
		}
		t.Skipf("no %s mounted from its root on this host (err %v)", kind, err)
	}
	return loc.mount.Mountpoint
}

// testCgroup creates a fresh cgroup below root and removes it at the end.
func testCgroup(t testing.TB, root string) string {
	t.Helper()
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "wsl-gpu-hook-test-"+hex.EncodeToString(b))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.Remove(dir); err != nil {
			t.Errorf("remove test cgroup: %v", err)
		}
	})
	return dir
}

// holder starts a process that stands for a container's init, inside the
// cgroup directory dir, and stops it at the end (before the cgroup goes).
func holder(t testing.TB, dir string) int {
	t.Helper()
	cmd := exec.Command("sleep", "1000")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	pid := cmd.Process.Pid
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
		t.Fatal(err)
	}
	return pid
}

// mknods creates character device nodes in a temporary directory.
func mknods(t *testing.T, devs map[string][2]uint32) map[string]string {
	t.Helper()
	dir := t.TempDir()
	paths := map[string]string{}
	for name, mm := range devs {
		p := filepath.Join(dir, name)
		if err := unix.Mknod(p, unix.S_IFCHR|0o600, int(unix.Mkdev(mm[0], mm[1]))); err != nil {
			t.Fatalf("mknod %s: %v", p, err)
		}
		paths[name] = p
	}
	return paths
}

// unrestricted checks that the test process itself can open every node, so a
// failure inside a test cgroup is that cgroup's doing.
func unrestricted(t *testing.T, nodes map[string]string) {
	t.Helper()
	for _, p := range nodes {
		fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Skipf("open %s outside any test cgroup: %v: this host cannot run the test", p, err)
		}
		unix.Close(fd)
	}
}

func TestAllowV1(t *testing.T) {
	requireRoot(t)
	cg := testCgroup(t, hierarchyRoot(t, false))
	// Order matters: "a" in devices.deny empties the allow list.
	for _, w := range [][2]string{{"devices.deny", "a"}, {"devices.allow", "c 1:3 rwm"}} {
		if err := os.WriteFile(filepath.Join(cg, w[0]), []byte(w[1]), 0); err != nil {
			t.Fatal(err)
		}
	}
	nodes := mknods(t, map[string][2]uint32{"null": {1, 3}, "fuse": {10, 229}})
	unrestricted(t, nodes)
	pid := holder(t, cg)

	wantOpen(t, "before Allow", probe(t, []string{cg}, nodes["null"], nodes["fuse"]),
		map[string]unix.Errno{nodes["null"]: 0, nodes["fuse"]: unix.EPERM})

	if err := Allow(pid, nil, devnode.Node{Major: 10, Minor: 229}); err != nil {
		t.Fatal(err)
	}

	wantOpen(t, "after Allow", probe(t, []string{cg}, nodes["null"], nodes["fuse"]),
		map[string]unix.Errno{nodes["null"]: 0, nodes["fuse"]: 0})
	list, err := os.ReadFile(filepath.Join(cg, "devices.list"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "c 1:3 rwm\nc 10:229 rwm\n"; string(list) != want {
		t.Errorf("devices.list = %q, want %q", list, want)
	}
}

func TestAllowV1ParentDenies(t *testing.T) {
	requireRoot(t)
	parent := testCgroup(t, hierarchyRoot(t, false))
	if err := os.WriteFile(filepath.Join(parent, "devices.deny"), []byte("a"), 0); err != nil {
		t.Fatal(err)
	}
	cg := testCgroup(t, parent) // inherits the empty allow list
	pid := holder(t, cg)

	err := Allow(pid, nil, devnode.Node{Major: 10, Minor: 229})
	want := fmt.Sprintf(`write "c 10:229 rwm" to %q: operation not permitted: the hook must run as root in the host's user and cgroup namespaces, and the parent cgroup must allow the device (rootless containers: use CDI or --device /dev/dxg instead)`,
		filepath.Join(cg, "devices.allow"))
	if err == nil || err.Error() != want {
		t.Fatalf("error = %v, want %q", err, want)
	}
}

// specRulesOnlyNull is a bundle's linux.resources.devices that denies every
// device but /dev/null (runc adds its defaults on top).
func specRulesOnlyNull() []specs.LinuxDeviceCgroup {
	one, three := int64(1), int64(3)
	return []specs.LinuxDeviceCgroup{
		{Allow: false, Access: "rwm"},
		{Allow: true, Type: "c", Major: &one, Minor: &three, Access: "rwm"},
	}
}

// attachLikeRunc attaches the device program runc builds for spec.
func attachLikeRunc(t *testing.T, cg string, spec []specs.LinuxDeviceCgroup) {
	t.Helper()
	var rules []rule
	for _, s := range spec {
		r, err := specRule(s)
		if err != nil {
			t.Fatal(err)
		}
		rules = append(rules, r)
	}
	rules = append(rules, runtimeDefaults()...)
	if err := cgroups.DevicesSetV2(cg, &cgroups.Resources{Devices: libraryRules(rules)}); err != nil {
		t.Fatalf("attach the runc-style program: %v", err)
	}
}

// libraryRules converts rules to runc's cgroups library's type, for the
// library's program generator: the oracle the tests hold ours to.
func libraryRules(rules []rule) []*devconfig.Rule {
	var lib []*devconfig.Rule
	for _, r := range rules {
		lib = append(lib, &devconfig.Rule{
			Type: devconfig.Type(r.typ), Major: r.major, Minor: r.minor,
			Permissions: devconfig.Permissions(r.access.String()), Allow: r.allow,
		})
	}
	return lib
}

func programIDs(t *testing.T, cg string) []uint32 {
	t.Helper()
	fd, err := unix.Open(cg, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	ids, err := deviceProgramIDs(fd)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

func TestAllowV2ReplacesProgram(t *testing.T) {
	requireRoot(t)
	cg := testCgroup(t, hierarchyRoot(t, true))
	spec := specRulesOnlyNull()
	attachLikeRunc(t, cg, spec)
	before := programIDs(t, cg)
	if len(before) != 1 {
		t.Fatalf("programs attached by the runc-style setup: %v, want one", before)
	}
	nodes := mknods(t, map[string][2]uint32{
		"null": {1, 3},    // allowed by the spec
		"zero": {1, 5},    // allowed by runc's defaults
		"kmsg": {1, 11},   // allowed by neither
		"fuse": {10, 229}, // the device to allow
	})
	unrestricted(t, nodes)
	pid := holder(t, cg)
	all := []string{nodes["null"], nodes["zero"], nodes["kmsg"], nodes["fuse"]}

	wantOpen(t, "before Allow", probe(t, []string{cg}, all...), map[string]unix.Errno{
		nodes["null"]: 0, nodes["zero"]: 0, nodes["kmsg"]: unix.EPERM, nodes["fuse"]: unix.EPERM,
	})

	if err := Allow(pid, spec, devnode.Node{Major: 10, Minor: 229}); err != nil {
		t.Fatal(err)
	}

	wantOpen(t, "after Allow", probe(t, []string{cg}, all...), map[string]unix.Errno{
		nodes["null"]: 0, nodes["zero"]: 0, nodes["kmsg"]: unix.EPERM, nodes["fuse"]: 0,
	})
	after := programIDs(t, cg)
	if len(after) != 1 || after[0] == before[0] {
		t.Errorf("programs attached after Allow: %v (before %v), want exactly one new one", after, before)
	}
}

func TestAllowV2WithoutProgramChangesNothing(t *testing.T) {
	requireRoot(t)
	cg := testCgroup(t, hierarchyRoot(t, true))
	pid := holder(t, cg)
	if err := Allow(pid, specRulesOnlyNull(), devnode.Node{Major: 10, Minor: 229}); err != nil {
		t.Fatal(err)
	}
	if ids := programIDs(t, cg); len(ids) != 0 {
		t.Errorf("programs attached: %v, want none: a cgroup without a device program must stay unrestricted", ids)
	}
}

func TestAllowErrors(t *testing.T) {
	tests := []struct {
		name    string
		pid     int
		rules   []specs.LinuxDeviceCgroup
		dev     devnode.Node
		wantErr string
	}{
		{
			name:    "bad device",
			pid:     os.Getpid(),
			dev:     devnode.Node{Major: 10, Minor: 1 << 20},
			wantErr: "device c 10:1048576: major must be in [0, 4095] and minor in [0, 1048575]",
		},
		{
			name:    "bad spec rule",
			pid:     os.Getpid(),
			rules:   []specs.LinuxDeviceCgroup{{Allow: true, Type: "z", Access: "rwm"}},
			dev:     devnode.Node{Major: 10, Minor: 229},
			wantErr: `device rules of the bundle's config.json: linux.resources.devices[0]: type "z": want "a", "b" or "c"`,
		},
		{
			name:    "no such process",
			pid:     1 << 30, // above pid_max's limit of 2^22
			dev:     devnode.Node{Major: 10, Minor: 229},
			wantErr: `open "/proc/1073741824/cgroup": open /proc/1073741824/cgroup: no such file or directory: is pid 1073741824 (the container's init) still running?`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Allow(tt.pid, tt.rules, tt.dev)
			if err == nil || err.Error() != tt.wantErr {
				t.Fatalf("error = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

// TestAllowSeveral allows two devices in one call, through either
// hierarchy: each must open afterwards, a third must stay denied.
func TestAllowSeveral(t *testing.T) {
	requireRoot(t)
	for _, v2 := range []bool{false, true} {
		t.Run(map[bool]string{false: "v1", true: "v2"}[v2], func(t *testing.T) {
			cg := testCgroup(t, hierarchyRoot(t, v2))
			var spec []specs.LinuxDeviceCgroup
			if v2 {
				spec = specRulesOnlyNull()
				attachLikeRunc(t, cg, spec)
			} else {
				for _, w := range [][2]string{{"devices.deny", "a"}, {"devices.allow", "c 1:3 rwm"}} {
					if err := os.WriteFile(filepath.Join(cg, w[0]), []byte(w[1]), 0); err != nil {
						t.Fatal(err)
					}
				}
			}
			nodes := mknods(t, map[string][2]uint32{"fuse": {10, 229}, "kmsg": {1, 11}, "loop-control": {10, 237}})
			unrestricted(t, nodes)
			pid := holder(t, cg)

			if err := Allow(pid, spec, devnode.Node{Major: 10, Minor: 229}, devnode.Node{Major: 1, Minor: 11}); err != nil {
				t.Fatal(err)
			}
			wantOpen(t, "after Allow", probe(t, []string{cg}, nodes["fuse"], nodes["kmsg"], nodes["loop-control"]), map[string]unix.Errno{
				nodes["fuse"]: 0, nodes["kmsg"]: 0, nodes["loop-control"]: unix.EPERM,
			})
		})
	}
}

func TestAllowNothing(t *testing.T) {
	// No device: no cgroup is looked up, even for a pid that is gone.
	if err := Allow(1<<30, nil); err != nil {
		t.Fatal(err)
	}
}

// TestAllowV2ReplacesSeveralPrograms: with two device programs attached
// (runc's and another manager's, which allows everything), Allow attaches
// its own and detaches both, as runc does; the device rules then are
// exactly the spec's, runc's defaults and the new device.
func TestAllowV2ReplacesSeveralPrograms(t *testing.T) {
	requireRoot(t)
	cg := testCgroup(t, hierarchyRoot(t, true))
	spec := specRulesOnlyNull()
	attachLikeRunc(t, cg, spec)
	allowAll, err := deviceProgram(parseRules(t, "allow a *:* rwm"))
	if err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(cg, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := replaceDevicePrograms(fd, nil, allowAll); err != nil {
		t.Fatal(err)
	}
	before := programIDs(t, cg)
	if len(before) != 2 {
		t.Fatalf("programs attached by the setup: %v, want two", before)
	}
	nodes := mknods(t, map[string][2]uint32{"null": {1, 3}, "kmsg": {1, 11}, "fuse": {10, 229}})
	unrestricted(t, nodes)
	pid := holder(t, cg)

	if err := Allow(pid, spec, devnode.Node{Major: 10, Minor: 229}); err != nil {
		t.Fatal(err)
	}
	after := programIDs(t, cg)
	if len(after) != 1 || slices.Contains(before, after[0]) {
		t.Errorf("programs attached after Allow: %v (before %v), want exactly one new one", after, before)
	}
	wantOpen(t, "after Allow", probe(t, []string{cg}, nodes["null"], nodes["kmsg"], nodes["fuse"]), map[string]unix.Errno{
		nodes["null"]: 0, nodes["kmsg"]: unix.EPERM, nodes["fuse"]: 0,
	})
}
