package devcgroup

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/opencontainers/cgroups"
	"golang.org/x/sys/unix"
)

// progTag is the tag the kernel computes over a loaded program's
// instructions (struct bpf_prog_info's tag, via BPF_OBJ_GET_INFO_BY_FD).
func progTag(t *testing.T, id uint32) [8]byte {
	t.Helper()
	fd, err := progFdByID(id)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	var info struct {
		typ, id uint32
		tag     [8]byte
	}
	attr := struct {
		fd, infoLen uint32
		info        uint64
	}{fd: uint32(fd), infoLen: uint32(unsafe.Sizeof(info)), info: uint64(uintptr(unsafe.Pointer(&info)))}
	if _, errno := bpf(unix.BPF_OBJ_GET_INFO_BY_FD, unsafe.Pointer(&attr), unsafe.Sizeof(attr)); errno != 0 {
		t.Fatalf("BPF_OBJ_GET_INFO_BY_FD: %v", errno)
	}
	return info.tag
}

// Probe operations beyond a read-only open (see TestProbeHelper): "w:path"
// opens for writing, "m:b:7:0:path" makes (and removes) a node.
func probeOp(line string) unix.Errno {
	var err error
	switch {
	case strings.HasPrefix(line, "w:"):
		var fd int
		fd, err = unix.Open(line[2:], unix.O_WRONLY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
		if err == nil {
			unix.Close(fd)
		}
	case strings.HasPrefix(line, "m:"):
		f := strings.SplitN(line[2:], ":", 4)
		major, _ := strconv.Atoi(f[1])
		minor, _ := strconv.Atoi(f[2])
		mode := uint32(unix.S_IFCHR)
		if f[0] == "b" {
			mode = unix.S_IFBLK
		}
		err = unix.Mknod(f[3], mode|0o600, int(unix.Mkdev(uint32(major), uint32(minor))))
		if err == nil {
			unix.Unlink(f[3])
		}
	default:
		var fd int
		fd, err = unix.Open(line, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
		if err == nil {
			unix.Close(fd)
		}
	}
	if errno, ok := err.(unix.Errno); ok {
		return errno
	}
	if err != nil {
		return unix.EIO
	}
	return 0
}

// TestDeviceProgramMatchesRunc holds the hand-written program to the one
// runc's cgroups library generates, for a table of rule sets: both are
// attached to fresh cgroups, the kernel's tags of the two programs must be
// equal (the same instructions), and opening for reading and writing and
// mknod-ing a set of character and block nodes must give the same answer
// in both. A rule set the library refuses, ours must refuse too.
func TestDeviceProgramMatchesRunc(t *testing.T) {
	requireRoot(t)
	root := hierarchyRoot(t, true)
	dir := t.TempDir()
	type node struct {
		name         string
		block        bool
		major, minor uint32
	}
	nodes := []node{
		{"null", false, 1, 3}, {"zero", false, 1, 5}, {"kmsg", false, 1, 11}, {"fuse", false, 10, 229},
		{"tun", false, 10, 200}, {"ptmx", false, 5, 2}, {"tty", false, 5, 0},
		{"loop0", true, 7, 0}, {"b1-3", true, 1, 3}, {"sda", true, 8, 0},
	}
	var ops []string
	for _, n := range nodes {
		p := filepath.Join(dir, n.name)
		mode, typ := uint32(unix.S_IFCHR), "c"
		if n.block {
			mode, typ = unix.S_IFBLK, "b"
		}
		if err := unix.Mknod(p, mode|0o600, int(unix.Mkdev(n.major, n.minor))); err != nil {
			t.Fatal(err)
		}
		ops = append(ops, p, "w:"+p, fmt.Sprintf("m:%s:%d:%d:%s.new", typ, n.major, n.minor, p))
	}
	// Outside any test cgroup, as the baseline every cgroup can only narrow.
	free := map[string]unix.Errno{}
	for _, op := range ops {
		free[op] = probeOp(op)
	}

	tests := []struct {
		name  string
		rules []string // before runc's defaults unless noDefaults
		// noDefaults leaves runc's defaults out.
		noDefaults bool
		wantErr    bool
	}{
		{name: "runc default: deny all, then runc's defaults", rules: []string{"deny a *:* rwm"}},
		{name: "spec, runc's defaults and ours", rules: []string{"deny a *:* rwm", "allow c 1:3 rwm", "deny c 10:229 rwm", "allow c 10:229 rwm"}},
		{name: "no rules at all", noDefaults: true},
		{name: "wildcards", rules: []string{"deny a *:* rwm", "allow c 10:* rw", "allow b 7:* r", "allow c *:11 r"}},
		{name: "denies after allows", rules: []string{"deny a *:* rwm", "allow c 1:11 rwm", "deny c 1:11 w", "allow c 10:229 rw", "deny c 10:229 rw"}},
		{name: "allow all, then denies", rules: []string{"allow a *:* rwm", "deny c 1:11 rwm", "deny b 7:* rw", "deny c 10:229 w"}, noDefaults: true},
		{name: "allow all, then denies, then runc's defaults", rules: []string{"allow a *:* rwm", "deny c 1:11 rwm", "deny b 8:* rwm"}},
		{name: "block vs char", rules: []string{"deny a *:* rwm", "allow b 1:3 rwm", "allow c 7:0 rwm"}, noDefaults: true},
		{name: "partial access", rules: []string{"deny a *:* rwm", "allow c 1:11 r", "allow c 10:229 rw", "allow b 7:0 m", "allow c 10:200 w", "allow b 8:0 rw"}, noDefaults: true},
		{name: "a deny of some access resets with a", rules: []string{"allow c 1:11 rwm", "deny a *:* m", "allow c 1:5 r"}, noDefaults: true},
		{name: "a hole in a wildcard", rules: []string{"deny a *:* rwm", "allow c 1:* rw", "deny c 1:11 w"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rules := parseRules(t, tt.rules...)
			if !tt.noDefaults {
				rules = append(rules, runtimeDefaults()...)
			}
			theirs, ours := testCgroup(t, root), testCgroup(t, root)
			libErr := cgroups.DevicesSetV2(theirs, &cgroups.Resources{Devices: libraryRules(rules)})
			prog, err := deviceProgram(rules)
			if (libErr != nil) != (err != nil) || (err != nil) != tt.wantErr {
				t.Fatalf("runc's library: %v; ours: %v; want an error: %v", libErr, err, tt.wantErr)
			}
			if err != nil {
				return
			}
			fd, err := unix.Open(ours, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(fd)
			if err := replaceDevicePrograms(fd, nil, prog); err != nil {
				t.Fatal(err)
			}
			theirIDs, ourIDs := programIDs(t, theirs), programIDs(t, ours)
			if len(theirIDs) != 1 || len(ourIDs) != 1 {
				t.Fatalf("programs attached: runc's %v, ours %v; want one each", theirIDs, ourIDs)
			}
			if a, b := progTag(t, theirIDs[0]), progTag(t, ourIDs[0]); a != b {
				t.Errorf("program tags differ: runc's %x, ours %x", a, b)
			}

			got := map[string]map[string]unix.Errno{}
			for name, cg := range map[string]string{"runc's": theirs, "ours": ours} {
				got[name] = probeOps(t, cg, ops)
			}
			var allowed, denied int
			for _, op := range ops {
				a, b := got["runc's"][op], got["ours"][op]
				if a != b {
					t.Errorf("%s: %q under runc's program, %q under ours", strings.TrimPrefix(op, dir+"/"), errText(a), errText(b))
				}
				switch {
				case b == unix.EPERM && free[op] != unix.EPERM:
					denied++
				case b == free[op]:
					allowed++
				}
			}
			t.Logf("%d operations as without a program, %d denied", allowed, denied)
		})
	}
}

// probeOps runs ops from a fresh process inside cg, as probe does.
func probeOps(t *testing.T, cg string, ops []string) map[string]unix.Errno {
	t.Helper()
	return probe(t, []string{cg}, ops...)
}
