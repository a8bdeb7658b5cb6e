package nstrust

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/emulated"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/fixture"
)

func TestParse(t *testing.T) {
	for _, tt := range []struct {
		name, uidMap, overflow string
		own                    bool
		mapped, unmapped       []uint32
		err                    string
	}{
		{name: "the initial namespace", uidMap: "         0          0 4294967295\n", overflow: "65534\n",
			mapped: []uint32{0, 65534, 4294967294}},
		{name: "a container's, Kubernetes' 65536 ids", uidMap: "0 100000 65536\n", overflow: "65534\n", own: true,
			mapped: []uint32{0, 65534, 65535}, unmapped: []uint32{65536, 100000}},
		{name: "userns-remap's narrow map", uidMap: "0 100000 1000\n", overflow: "65534", own: true,
			mapped: []uint32{0, 999}, unmapped: []uint32{1000, 65534}},
		{name: "rootless podman's", uidMap: "0 1000 1\n1 100000 65536\n", overflow: "65534", own: true,
			mapped: []uint32{0, 1, 65534, 65536}, unmapped: []uint32{65537}},
		{name: "identity of part of the ids", uidMap: "0 0 65536\n", overflow: "65534", own: true,
			mapped: []uint32{0, 65535}, unmapped: []uint32{65536}},
		{name: "two numbers", uidMap: "0 100000\n", overflow: "65534", err: `uid map line "0 100000": not three numbers`},
		{name: "not a number", uidMap: "0 x 1\n", overflow: "65534", err: `uid map line "0 x 1"`},
		{name: "empty range", uidMap: "0 100000 0\n", overflow: "65534", err: "not a range"},
		{name: "past the last id", uidMap: "1 0 4294967295\n", overflow: "65534", err: "not a range"},
		{name: "bad overflow uid", uidMap: "0 0 4294967295\n", overflow: "-1", err: `overflow uid "-1"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ns, err := Parse([]byte(tt.uidMap), []byte(tt.overflow))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("Parse error %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if ns.Own() != tt.own {
				t.Errorf("Own = %v, want %v", ns.Own(), tt.own)
			}
			for _, u := range tt.mapped {
				if !ns.Mapped(u) {
					t.Errorf("uid %d not mapped", u)
				}
			}
			for _, u := range tt.unmapped {
				if ns.Mapped(u) {
					t.Errorf("uid %d mapped", u)
				}
			}
		})
	}
}

// TestCurrent: this process's namespace reads, whatever it is.
func TestCurrent(t *testing.T) {
	if _, err := Current(); err != nil {
		t.Fatal(err)
	}
}

// envChild carries the paths a child in a user namespace reads.
const envChild = "NSTRUST_CHILD"

// childResult is what the child said of one path.
type childResult struct {
	Data                 string
	Err                  string
	NotTrusted, NotExist bool
}

// TestReadFileChild is the re-run inside a user namespace.
func TestReadFileChild(t *testing.T) {
	env := os.Getenv(envChild)
	if env == "" {
		t.Skip("run by TestReadFile")
	}
	var paths []string
	if err := json.Unmarshal([]byte(env), &paths); err != nil {
		t.Fatal(err)
	}
	ns, err := Current()
	if err != nil {
		t.Fatal(err)
	}
	if !ns.Own() {
		t.Fatal("the child is not in a user namespace of its own")
	}
	res := map[string]childResult{}
	for _, p := range paths {
		data, err := ns.ReadFile(p, 1024)
		r := childResult{Data: string(data)}
		if err != nil {
			r = childResult{Err: err.Error(), NotTrusted: errors.Is(err, ErrNotTrusted), NotExist: errors.Is(err, fs.ErrNotExist)}
		}
		res[p] = r
	}
	out, _ := json.Marshal(res)
	fmt.Printf("\nRESULT %s\n", out)
}

// TestReadFile reads files from inside user namespaces (as the container's
// root, host uid 100000) that map 65536 ids, as Kubernetes does (the
// overflow uid 65534 is then the namespace's own, host uid 165534), and
// 1000 (it is not): a file and the directories to it are trusted only
// where nothing in the namespace can have written them. Root: it makes the
// namespaces and chowns the files.
func TestReadFile(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("root: makes user namespaces with any map, chowns files")
	}
	emulated.Skip(t, "the test binary started again in a user namespace")
	const (
		nsRoot   = 100000         // the namespace's uid 0
		nsNobody = 100000 + 65534 // its 65534 when it maps 65536 ids
	)
	base := reachableDir(t)
	bin := filepath.Join(base, "nstrust.test")
	copyExe(t, os.Args[0], bin)
	type node struct {
		path  string // relative to base; a trailing / makes a directory
		mode  os.FileMode
		owner int
		group int    // -1: root's; else the owner's
		link  string // a symbolic link to this
	}
	tree := []node{
		{path: "root/", mode: 0o755}, {path: "root/file", mode: 0o644},
		{path: "root/private", mode: 0o600},
		{path: "root/ns-root", mode: 0o644, owner: nsRoot},
		{path: "root/ns-nobody", mode: 0o644, owner: nsNobody},
		// Its group unmapped: capabilities could not override it, but its
		// owner may write it (or chmod it) all the same.
		{path: "root/ns-nobody-root-group", mode: 0o644, owner: nsNobody, group: -1},
		{path: "root/group-writable", mode: 0o664},
		{path: "root/link", link: "file"},
		{path: "ns-root-dir/", mode: 0o755, owner: nsRoot}, {path: "ns-root-dir/file", mode: 0o644},
		{path: "ns-nobody-dir/", mode: 0o755, owner: nsNobody}, {path: "ns-nobody-dir/file", mode: 0o644},
		{path: "group-dir/", mode: 0o775}, {path: "group-dir/file", mode: 0o644},
		{path: "sticky-dir/", mode: 0o777 | os.ModeSticky}, {path: "sticky-dir/file", mode: 0o644},
		{path: "dir-link", link: "root"},
	}
	for _, n := range tree {
		p := filepath.Join(base, n.path)
		var err error
		switch {
		case n.link != "":
			err = os.Symlink(n.link, p)
		case strings.HasSuffix(n.path, "/"):
			err = os.Mkdir(p, 0o700)
		default:
			err = os.WriteFile(p, []byte(n.path), 0o600)
		}
		if err == nil && n.link == "" {
			group := n.owner
			if n.group == -1 {
				group = 0
			}
			if err = os.Chmod(p, n.mode); err == nil {
				err = os.Chown(p, n.owner, group)
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	type want int
	const (
		trusted want = iota
		untrusted
		missing
		other
	)
	cases := []struct {
		path     string
		wide     want // in the namespace of 65536 ids
		narrow   want // in the namespace of 1000
		wideErr  string
		narrowEr string
	}{
		{"root/file", trusted, trusted, "", ""},
		{"root/ns-root", untrusted, untrusted, "root/ns-root is owned by uid 0 of the namespace", "root/ns-root is owned by uid 0 of the namespace"},
		// Host uid 165534 is the wide namespace's 65534, which stat shows
		// as it shows root; the narrow one does not map it.
		{"root/ns-nobody", untrusted, trusted, "root/ns-nobody is owned by uid 65534 of the namespace", ""},
		{"root/ns-nobody-root-group", untrusted, trusted, "root/ns-nobody-root-group is owned by uid 65534 of the namespace", ""},
		{"ns-root-dir/file", untrusted, untrusted, "ns-root-dir is owned by uid 0 of the namespace", "ns-root-dir is owned by uid 0"},
		{"ns-nobody-dir/file", untrusted, trusted, "ns-nobody-dir is owned by uid 65534 of the namespace", ""},
		{"root/group-writable", untrusted, untrusted, "is writable by group or others (mode 0664)", "(mode 0664)"},
		{"group-dir/file", untrusted, untrusted, "group-dir is writable by group or others (mode 0775)", "(mode 0775)"},
		{"sticky-dir/file", trusted, trusted, "", ""},
		{"root/link", untrusted, untrusted, "root/link is a symbolic link", "is a symbolic link"},
		{"dir-link/file", untrusted, untrusted, "dir-link is a symbolic link", "is a symbolic link"},
		{"root/none", missing, missing, "", ""},
		{"root", untrusted, untrusted, "root is not a regular file", "is not a regular file"},
		// Not readable by others: no read, whoever may have written it.
		{"root/private", other, other, "permission denied", "permission denied"},
	}
	var paths []string
	for _, c := range cases {
		paths = append(paths, filepath.Join(base, c.path))
	}
	for _, m := range []struct {
		name string
		size int
	}{{"65536 ids", 65536}, {"1000 ids", 1000}} {
		t.Run(m.name, func(t *testing.T) {
			res := runChild(t, bin, paths, m.size)
			for _, c := range cases {
				t.Run(c.path, func(t *testing.T) {
					w, werr := c.wide, c.wideErr
					if m.size == 1000 {
						w, werr = c.narrow, c.narrowEr
					}
					r := res[filepath.Join(base, c.path)]
					ok := false
					switch w {
					case trusted:
						ok = r.Err == "" && r.Data == c.path
					case untrusted:
						ok = r.NotTrusted && !r.NotExist
					case missing:
						ok = r.NotExist && !r.NotTrusted
					case other:
						ok = r.Err != "" && !r.NotTrusted
					}
					if !ok || !strings.Contains(r.Err, werr) {
						t.Errorf("ReadFile: %+v; want %d, error with %q", r, w, werr)
					}
				})
			}
		})
	}
}

// runChild runs TestReadFileChild in a new user namespace mapping size
// ids from uid 0 to host uid 100000, as its uid 0, and returns what it
// read.
func runChild(t *testing.T, bin string, paths []string, size int) map[string]childResult {
	t.Helper()
	env, _ := json.Marshal(paths)
	cmd := inNamespace(bin, size, envChild+"="+string(env), "-test.run=^TestReadFileChild$", "-test.count=1", "-test.v")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if s, ok := strings.CutPrefix(l, "RESULT "); ok {
			var res map[string]childResult
			if err := json.Unmarshal([]byte(s), &res); err != nil {
				t.Fatal(err)
			}
			return res
		}
	}
	t.Fatalf("child said nothing:\n%s", out)
	return nil
}

// inNamespace is the test binary bin run with args in a new user
// namespace mapping size ids from uid 0 to host uid 100000, as its uid 0,
// with env added to the environment.
func inNamespace(bin string, size int, env string, args ...string) *exec.Cmd {
	cmd := exec.Command(bin, args...)
	cmd.Dir = "/"
	cmd.Env = append(os.Environ(), env)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: 100000, Size: size}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: 100000, Size: size}},
		Credential:  &syscall.Credential{Uid: 0, Gid: 0, NoSetGroups: true},
	}
	return cmd
}

// reachableDir is a new temporary directory, root's, that every user may
// enter, under /tmp (root's, sticky) or wherever TMPDIR says.
func reachableDir(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	fixture.OpenToAll(t, dir)
	return dir
}

func copyExe(t testing.TB, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o755); err != nil {
		t.Fatal(err)
	}
}
