package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/privileged"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/fixture"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/simhost"
)

// tools are the binaries a test runs, built into its own temp dir.
type tools struct {
	dir, sim, probe, hook string
}

// needRoot skips a test that drives dxgsim for real.
func needRoot(t *testing.T) {
	t.Helper()
	privileged.Require(t, "dxgsim creates device nodes, installs seccomp listeners and reads other processes' memory")
}

// build compiles dxgsim and its probe (and the hook when withHook) into a
// directory the denied fault's unprivileged user can reach.
func build(t *testing.T, withHook bool) *tools {
	t.Helper()
	needRoot(t)
	dir := worldDir(t)
	tl := &tools{dir: dir, sim: filepath.Join(dir, "dxgsim"), probe: filepath.Join(dir, "dxgprobe"), hook: filepath.Join(dir, "wsl-gpu-hook")}
	builds := [][]string{{"-o", tl.sim, "."}, {"-o", tl.probe, "./internal/dxgprobe"}}
	if withHook {
		// info is wsl-gpu-ctl's: the hook hands it to the one beside it.
		builds = append(builds, []string{"-o", tl.hook, "../../cmd/wsl-gpu-hook"}, []string{"-o", filepath.Join(dir, "wsl-gpu-ctl"), "../../cmd/wsl-gpu-ctl"})
	}
	for _, b := range builds {
		cmd := exec.Command("go", append([]string{"build"}, b...)...)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", strings.Join(b, " "), err, out)
		}
	}
	return tl
}

// worldDir is a temp dir that uid 65534 can enter.
func worldDir(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	for _, p := range []string{filepath.Dir(d), d} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

type runResult struct {
	code           int
	stdout, stderr string
}

// run runs CMD under dxgsim with simArgs; it fails the test only if
// dxgsim could not be started at all.
func (tl *tools) run(t *testing.T, simArgs []string, cmd ...string) runResult {
	t.Helper()
	c := exec.Command(tl.sim, append(append(simArgs, "--"), cmd...)...)
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	err := c.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return runResult{code, out.String(), errb.String()}
}

// step mirrors dxgprobe's Result line.
type step struct {
	Op       string `json:"op"`
	Ret      int64  `json:"ret"`
	Errno    syscall.Errno
	RawErrno int `json:"errno"`
	Count    *uint32
	RawCount *uint32 `json:"count"`
	Adapters []struct {
		Handle   uint32 `json:"handle"`
		LUIDLow  uint32 `json:"luidLow"`
		LUIDHigh uint32 `json:"luidHigh"`
	} `json:"adapters"`
	U32    []uint32 `json:"u32"`
	U64    *uint64  `json:"u64"`
	Text   *string  `json:"text"`
	Status *uint32  `json:"status"`
	Size   *uint32  `json:"size"`
	Handle *uint32  `json:"handle"`
	Child  []step   `json:"child"`
}

func (s *step) fix() {
	s.Errno, s.Count = syscall.Errno(s.RawErrno), s.RawCount
	for i := range s.Child {
		s.Child[i].fix()
	}
}

func (s step) ok() bool { return s.Ret == 0 && s.Errno == 0 }

// probe runs dxgprobe DEVICE STEPS under dxgsim and returns its lines,
// indexed by op (the open line is "open").
func (tl *tools) probeRun(t *testing.T, simArgs []string, dev string, steps ...string) (runResult, []step) {
	t.Helper()
	r := tl.run(t, simArgs, append([]string{tl.probe, dev}, steps...)...)
	var out []step
	sc := bufio.NewScanner(strings.NewReader(r.stdout))
	for sc.Scan() {
		var s step
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			t.Fatalf("probe line %q: %v\nstderr: %s", sc.Text(), err, r.stderr)
		}
		s.fix()
		out = append(out, s)
	}
	if len(out) != 1+len(steps) && !(len(out) == 1 && out[0].Errno != 0) {
		t.Fatalf("probe printed %d lines for %d steps (exit %d)\nstdout: %s\nstderr: %s", len(out), len(steps), r.code, r.stdout, r.stderr)
	}
	return r, out
}

func profile(t *testing.T, name string) simhost.Profile {
	t.Helper()
	p, err := simhost.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func misuseLines(stderr string) []string {
	var m []string
	for _, l := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(l, "dxgsim: misuse: ") {
			m = append(m, l)
		}
	}
	return m
}

func luids(as []simhost.Adapter) []string {
	var s []string
	for _, a := range as {
		s = append(s, fmt.Sprintf("%x:%x", a.LUIDHigh, a.LUIDLow))
	}
	return s
}

func stepLUIDs(s step) []string {
	var l []string
	for _, a := range s.Adapters {
		l = append(l, fmt.Sprintf("%x:%x", a.LUIDHigh, a.LUIDLow))
	}
	return l
}

// Every profile, read through raw ioctls: counts, both enumerations with
// and without compute-only adapters, and every query the hook relies on,
// compared with the profile.
func TestEnumerateEveryProfile(t *testing.T) {
	tl := build(t, false)
	for _, name := range simhost.Names() {
		t.Run(name, func(t *testing.T) {
			p := profile(t, name)
			var visible []simhost.Adapter
			for _, a := range p.Adapters {
				if !a.ComputeOnly() {
					visible = append(visible, a)
				}
			}
			steps := []string{"count2", "count3:0", "count3:1", "enum3:0:64", "close:all", "enum2:64", "close:all", "enum3:1:64"}
			for i := range p.Adapters {
				steps = append(steps, fmt.Sprintf("query:%d:13:4", i), fmt.Sprintf("query:%d:57:4", i),
					fmt.Sprintf("query:%d:30:4", i), fmt.Sprintf("query:%d:31:28", i),
					fmt.Sprintf("query:%d:65:8192", i), fmt.Sprintf("registry:%d", i))
			}
			steps = append(steps, "close:all")
			dev := filepath.Join(t.TempDir(), "dxg")
			r, s := tl.probeRun(t, []string{"--profile", name, "--dev", dev}, dev, steps...)
			if r.code != 0 || len(misuseLines(r.stderr)) != 0 {
				t.Fatalf("exit %d, stderr %s", r.code, r.stderr)
			}
			for i, op := range []string{"count2", "count3:0", "count3:1"} {
				// The count query counts every adapter, listed or not.
				if c := s[1+i]; !c.ok() || *c.Count != uint32(len(p.Adapters)) {
					t.Errorf("%s = %d (%v), want %d", op, *c.Count, c.Errno, len(p.Adapters))
				}
			}
			tests := []struct {
				step step
				want []simhost.Adapter
			}{{s[4], visible}, {s[6], visible}, {s[8], p.Adapters}}
			seen := map[uint32]bool{}
			for _, tt := range tests {
				if !tt.step.ok() || *tt.step.Count != uint32(len(tt.want)) ||
					strings.Join(stepLUIDs(tt.step), " ") != strings.Join(luids(tt.want), " ") {
					t.Errorf("%s: %v count %d LUIDs %v, want %v", tt.step.Op, tt.step.Errno, *tt.step.Count, stepLUIDs(tt.step), luids(tt.want))
				}
				for _, a := range tt.step.Adapters {
					if seen[a.Handle] || a.Handle == 0 {
						t.Errorf("%s: handle %#x is zero or was given before: every enumeration opens new ones", tt.step.Op, a.Handle)
					}
					seen[a.Handle] = true
				}
			}
			for i, a := range p.Adapters {
				q := s[9+6*i : 9+6*i+6]
				for _, x := range q {
					if !x.ok() {
						t.Fatalf("adapter %d %s: %d %v", i, x.Op, x.Ret, x.Errno)
					}
				}
				got := fmt.Sprintf("wddm %d type %#x phys %d ids %x desc %q path %q",
					q[0].U32[0], q[1].U32[0], q[2].U32[0], q[3].U32[1:6], *q[4].Text, *q[5].Text)
				want := fmt.Sprintf("wddm %d type %#x phys %d ids %x desc %q path %q",
					a.WDDMVersion, a.Flags|simhost.FlagParavirtualized, 1,
					[]uint32{a.VendorID, a.DeviceID, a.SubVendorID, a.SubSystemID, a.RevisionID}, a.Description, a.DriverStorePath)
				if got != want {
					t.Errorf("adapter %d:\n got %s\nwant %s", i, got, want)
				}
				if first := q[5].Child[0]; *first.Status != 1 || *first.Size != uint32(2*len(a.DriverStorePath)+2) {
					t.Errorf("adapter %d registry first answer: status %d size %d, want BUFFER_OVERFLOW and the UTF-16 size with NUL", i, *first.Status, *first.Size)
				}
			}
		})
	}
}

// ntstatus is how an old driver returned an NTSTATUS: sign-extended.
func ntstatus(v uint32) int64 { return int64(int32(v)) }

// The driver's rules and each fault, one probe run per case.
func TestProtocol(t *testing.T) {
	tl := build(t, false)
	nvidia := profile(t, "nvidia-laptop")
	type want struct {
		step  int // index in the probe's output; 0 is the open
		ret   int64
		errno syscall.Errno
		count int // -1: do not check
	}
	tests := []struct {
		name    string
		profile string
		faults  []string
		dev     string // default: the simulated node
		steps   []string
		want    []want
		check   func(t *testing.T, s []step)
	}{
		{
			name:  "ENUMADAPTERS2 capacity below the count: EOVERFLOW, count not written back",
			steps: []string{"enum2:1"},
			want:  []want{{1, -1, syscall.EOVERFLOW, 1}},
		},
		{
			name:  "ENUMADAPTERS2 capacity above 64: EINVAL",
			steps: []string{"enum2:65"},
			want:  []want{{1, -1, syscall.EINVAL, 65}},
		},
		{
			name:    "ENUMADAPTERS2 needs room for compute-only adapters it does not list",
			profile: "intel-npu",
			steps:   []string{"count2", "enum2:1", "enum2:2", "close:all"},
			want:    []want{{1, 0, 0, 2}, {2, -1, syscall.EOVERFLOW, 1}, {3, 0, 0, 1}, {4, 0, 0, -1}},
		},
		{
			name:  "ENUMADAPTERS3 has no 64 limit",
			steps: []string{"enum3:1:65", "close:all"},
			want:  []want{{1, 0, 0, 2}},
		},
		{
			name:  "CLOSEADAPTER of a handle never opened, and twice",
			steps: []string{"close:0x7ffffff0", "enum3:1:64", "close:0x40000000", "close:0x40000000", "close:all"},
			want:  []want{{1, -1, syscall.EINVAL, -1}, {3, 0, 0, -1}, {4, -1, syscall.EINVAL, -1}, {5, 0, 0, -1}},
		},
		{
			name:  "another process's handle is EINVAL",
			steps: []string{"enum3:1:64", "child:queryh:$0:13:4+close:$1", "query:0:13:4", "close:all"},
			want:  []want{{3, 0, 0, -1}, {4, 0, 0, -1}},
			check: func(t *testing.T, s []step) {
				c := s[2].Child
				if len(c) != 3 || c[1].Errno != syscall.EINVAL || c[2].Errno != syscall.EINVAL {
					t.Errorf("child using the parent's handles: %+v, want EINVAL twice", c)
				}
			},
		},
		{
			name: "QUERYADAPTERINFO argument checks",
			steps: []string{"enum3:1:64", "query:0:13:0", "query:0:48:131073", "query:0:13:8", "query:0:31:4",
				"query:0:9999:4", "queryh:0x7ffffff0:13:4", "close:all"},
			want: []want{{2, -1, syscall.EINVAL, -1}, {3, -1, syscall.EINVAL, -1}, {4, -1, syscall.EINVAL, -1},
				{5, -1, syscall.EINVAL, -1}, {6, -1, syscall.EPERM, -1}, {7, -1, syscall.EINVAL, -1}},
		},
		{
			name:  "OPENADAPTERFROMLUID",
			steps: []string{fmt.Sprintf("openluid:%#x:0", nvidia.Adapters[1].LUIDLow), "query:0:31:28", "openluid:0xdead:0", "close:all"},
			want:  []want{{1, 0, 0, -1}, {2, 0, 0, -1}, {3, -1, syscall.EINVAL, -1}, {4, 0, 0, -1}},
			check: func(t *testing.T, s []step) {
				if s[2].U32[1] != simhost.VendorNVIDIA {
					t.Errorf("handle from the NVIDIA LUID reports vendor %#x", s[2].U32[1])
				}
			},
		},
		{
			name:   "old-kernel: no ENUMADAPTERS3, ENUMADAPTERS2 works",
			faults: []string{"old-kernel"},
			steps:  []string{"count3:1", "enum3:1:64", "enum2:64", "close:all"},
			want:   []want{{1, -1, syscall.ENOTTY, -1}, {2, -1, syscall.ENOTTY, -1}, {3, 0, 0, 2}},
		},
		{
			name:   "query-fail: every query on that adapter is ENODEV",
			faults: []string{"query-fail=1"},
			steps:  []string{"enum3:1:64", "query:0:13:4", "query:1:13:4", "registry:1", "query:1:9999:4", "close:all"},
			want:   []want{{2, 0, 0, -1}, {3, -1, syscall.ENODEV, -1}, {4, -1, syscall.ENODEV, -1}, {5, -1, syscall.ENODEV, -1}},
		},
		{
			name:   "ntstatus: host and driver failures as raw NTSTATUS results",
			faults: []string{"query-fail=1", "ntstatus"},
			steps:  []string{"enum3:1:64", "query:1:13:4", "query:0:13:8", "enum2:1", "close:0x7ffffff0", "close:all"},
			want: []want{
				{2, ntstatus(0xC00002B6), 0, -1}, // STATUS_DEVICE_REMOVED
				{3, ntstatus(0xC000000D), 0, -1}, // STATUS_INVALID_PARAMETER
				{4, ntstatus(0xC0000023), 0, -1}, // STATUS_BUFFER_TOO_SMALL
				{5, ntstatus(0xC000000D), 0, -1},
			},
		},
		{
			name:   "ENUMADAPTERS2 capacity 0 with an array and no adapters: ENOMEM",
			faults: []string{"zero-adapters"},
			steps:  []string{"enum2:0"},
			want:   []want{{1, -1, syscall.ENOMEM, 0}},
		},
		{
			name:  "ENUMADAPTERS2 capacity 0 with an array and adapters: EOVERFLOW comes first",
			steps: []string{"enum2:0"},
			want:  []want{{1, -1, syscall.EOVERFLOW, 0}},
		},
		{
			name:  "CLOSEADAPTER(0) succeeds, with and without handles, and closes none",
			steps: []string{"close:0", "enum3:1:64", "close:0", "query:0:13:4", "close:all"},
			want:  []want{{1, 0, 0, -1}, {3, 0, 0, -1}, {4, 0, 0, -1}, {5, 0, 0, -1}},
		},
		{
			name: "a copy fault on any pointer is EINVAL, and a faulted fill keeps no handle",
			steps: []string{"badarg:enum2", "badarg:enum3", "badarg:close", "badarg:query", "badarg:openluid",
				"enum2bad:64", "enum3bad:64", "enum3:1:64", "querybad:0:13:4", "close:all"},
			want: []want{{1, -1, syscall.EINVAL, -1}, {2, -1, syscall.EINVAL, -1}, {3, -1, syscall.EINVAL, -1},
				{4, -1, syscall.EINVAL, -1}, {5, -1, syscall.EINVAL, -1}, {6, -1, syscall.EINVAL, 2},
				{7, -1, syscall.EINVAL, 2}, {8, 0, 0, 2}, {9, -1, syscall.EINVAL, -1}, {10, 0, 0, -1}},
		},
		{
			name:   "missing-folder: same inf, another hash",
			faults: []string{"missing-folder=1"},
			steps:  []string{"enum3:1:64", "registry:0", "registry:1", "close:all"},
			check: func(t *testing.T, s []step) {
				if *s[2].Text != nvidia.Adapters[0].DriverStorePath {
					t.Errorf("adapter 0 path %q changed", *s[2].Text)
				}
				orig, got := nvidia.Adapters[1].DriverStorePath, *s[3].Text
				stem := orig[:strings.LastIndexByte(orig, '_')+1]
				if got == orig || !strings.HasPrefix(got, stem) || !regexp.MustCompile(`_[0-9a-f]{16}$`).MatchString(got) {
					t.Errorf("moved path %q, want %s<16 other hex digits>", got, stem)
				}
			},
		},
		{
			name:   "zero-adapters",
			faults: []string{"zero-adapters"},
			steps:  []string{"count3:1", "count2", "enum3:1:64", "enum2:64"},
			want:   []want{{1, 0, 0, 0}, {2, 0, 0, 0}, {3, 0, 0, 0}, {4, 0, 0, 0}},
		},
		{
			name:   "denied: the node is 0600 and the command runs as nobody",
			faults: []string{"denied"},
			want:   []want{{0, -1, syscall.EACCES, -1}},
		},
		{
			name:  "a dxg request on another device runs in the kernel",
			dev:   "/dev/null",
			steps: []string{"count3:1", "enum2:64"},
			want:  []want{{1, -1, syscall.ENOTTY, -1}, {2, -1, syscall.ENOTTY, -1}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prof := tt.profile
			if prof == "" {
				prof = "nvidia-laptop"
			}
			dir := worldDir(t)
			node, reportPath := filepath.Join(dir, "dxg"), filepath.Join(dir, "report.json")
			args := []string{"--profile", prof, "--dev", node, "--report", reportPath}
			for _, f := range tt.faults {
				args = append(args, "--fault", f)
			}
			dev := node
			if tt.dev != "" {
				dev = tt.dev
			}
			r, s := tl.probeRun(t, args, dev, tt.steps...)
			if r.code != 0 || len(misuseLines(r.stderr)) != 0 {
				t.Fatalf("exit %d, stderr %s", r.code, r.stderr)
			}
			for _, w := range tt.want {
				got := s[w.step]
				if got.Ret != w.ret || got.Errno != w.errno {
					t.Errorf("%s: (%#x, %v), want (%#x, %v)", got.Op, got.Ret, got.Errno, w.ret, w.errno)
				}
				if w.count >= 0 && (got.Count == nil || *got.Count != uint32(w.count)) {
					t.Errorf("%s: count field %v, want %d", got.Op, got.Count, w.count)
				}
			}
			if tt.check != nil {
				tt.check(t, s)
			}
			var rep report
			data, err := os.ReadFile(reportPath)
			if err == nil {
				err = json.Unmarshal(data, &rep)
			}
			if err != nil {
				t.Fatal(err)
			}
			if tt.dev != "" && rep.Passthrough == 0 {
				t.Errorf("report counts no passthrough for a dxg request on %s", tt.dev)
			}
			if tt.dev == "" && rep.Passthrough != 0 {
				t.Errorf("report counts %d passthroughs on the simulated node", rep.Passthrough)
			}
			if _, err := os.Lstat(node); err == nil {
				t.Error("dxgsim left its device node behind")
			}
		})
	}
}

// Misuse the real driver punishes is reported: one line each, exit 3 when
// the command succeeded, and in the report. Handles a process leaves to its
// files are released with them, as the driver frees them, and are not
// misuse; handles a process still holds with the device open when the
// command ends are.
func TestMisuse(t *testing.T) {
	tl := build(t, false)
	// $P is the probe, $D the node, $O a file for a background probe's
	// output: the command waits until the probe printed step $S.
	const background = `$P $D $STEPS >$O 2>/dev/null & until grep -q '"op":"$S"' $O 2>/dev/null; do sleep 0.05; done`
	bg := func(steps, last string) string {
		return strings.NewReplacer("$STEPS", steps, "$S", last).Replace(background)
	}
	tests := []struct {
		name    string
		profile string
		shell   string // run through sh -c
		code    int
		misuse  []string  // regexps, one per line, in order
		handles [4]uint64 // opened, closed, released, open
	}{
		{
			name:    "clean run",
			shell:   `$P $D enum3:1:64 close:all`,
			handles: [4]uint64{2, 2, 0, 0},
		},
		{
			name:    "handles left to the exit are released",
			shell:   `$P $D enum3:1:64`,
			handles: [4]uint64{2, 0, 2, 0},
		},
		{
			name:    "handles left to closing the device are released",
			shell:   bg("enum3:1:64 closefd sleep:3000", "closefd"),
			handles: [4]uint64{2, 0, 2, 0},
		},
		{
			name:    "handles held with the device open when the command ends",
			shell:   bg("enum3:1:64 sleep:3000", "enum3:1:64"),
			code:    exitMisuse,
			misuse:  []string{`^dxgsim: misuse: pid \d+ \(dxgprobe\) was still running with the device open when dxgsim stopped, holding 2 adapter handle\(s\) never closed \(0x40000000, 0x40000040\): call CLOSEADAPTER for every handle an enumeration returns$`},
			handles: [4]uint64{2, 0, 0, 2},
		},
		{
			name:    "capacity below the adapter count",
			shell:   `$P $D enum3:1:1`,
			code:    exitMisuse,
			misuse:  []string{`^dxgsim: misuse: pid \d+ \(dxgprobe\): ENUMADAPTERS3 fill with capacity 1 below the adapter count 2: the real driver writes past its buffer and leaks handles; always pass capacity 64$`},
			handles: [4]uint64{2, 0, 0, 2}, // opened by the overrun, never returned
		},
		{
			name:    "capacity below the count even when the filtered list fits",
			profile: "intel-npu",
			shell:   `$P $D enum3:0:1 close:all`,
			code:    exitMisuse,
			misuse:  []string{`ENUMADAPTERS3 fill with capacity 1 below the adapter count 2`},
			handles: [4]uint64{1, 1, 0, 0},
		},
		{
			name:    "misuse and a failing command keep its status",
			shell:   `$P $D enum3:1:1 >/dev/null; $P $D openluid:0x4486d1:0 >/dev/null; exit 5`,
			code:    5,
			misuse:  []string{`ENUMADAPTERS3 fill with capacity 1 below the adapter count 2`},
			handles: [4]uint64{3, 0, 1, 2},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prof := tt.profile
			if prof == "" {
				prof = "nvidia-laptop"
			}
			dir := t.TempDir()
			node, reportPath := filepath.Join(dir, "dxg"), filepath.Join(dir, "report.json")
			r := tl.run(t, []string{"--profile", prof, "--dev", node, "--report", reportPath},
				"sh", "-c", strings.NewReplacer("$P", tl.probe, "$D", node, "$O", filepath.Join(dir, "probe.out")).Replace(tt.shell))
			lines := misuseLines(r.stderr)
			if r.code != tt.code || len(lines) != len(tt.misuse) {
				t.Fatalf("exit %d with %d misuse lines, want %d with %d\nstderr: %s", r.code, len(lines), tt.code, len(tt.misuse), r.stderr)
			}
			for i, re := range tt.misuse {
				if !regexp.MustCompile(re).MatchString(lines[i]) {
					t.Errorf("misuse line %q does not match %q", lines[i], re)
				}
			}
			var rep report
			data, err := os.ReadFile(reportPath)
			if err == nil {
				err = json.Unmarshal(data, &rep)
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := [4]uint64{rep.HandlesOpened, rep.HandlesClosed, rep.HandlesReleased, rep.HandlesOpen}; got != tt.handles {
				t.Errorf("report handles opened/closed/released/open %v, want %v", got, tt.handles)
			}
			if rep.MisuseTotal != len(tt.misuse) || len(rep.Misuse) != len(tt.misuse) {
				t.Errorf("report misuse %d %q, want %d", rep.MisuseTotal, rep.Misuse, len(tt.misuse))
			}
		})
	}
}

// --bind-host shows the fixture at the real /usr/lib/wsl and the node at
// /dev/dxg inside the command's namespace and leaves the machine as it was.
func TestBindHost(t *testing.T) {
	tl := build(t, false)
	for _, p := range []string{"/usr/lib/wsl", "/dev/dxg"} {
		if _, err := os.Lstat(p); err == nil {
			t.Skipf("%s exists on this machine (a real WSL host?): the test could not tell a leak from it", p)
		}
	}
	p := profile(t, "nvidia-laptop")
	root := fixture.Host(t, p.Name, fixture.Options{})
	// Inside: the node (10:229, 0666), the fixture read-only, /dev's own
	// submounts still there, and the probe enumerating through /dev/dxg.
	script := `set -e
test "$(stat -c '%F %t:%T %a' /dev/dxg)" = "character special file a:e5 666"
test -e /usr/lib/wsl/lib/libdxcore.so
test -d /usr/lib/wsl/drivers/` + p.Adapters[1].Folder + `
! touch /usr/lib/wsl/lib/x 2>/dev/null
grep -q ' /dev/pts ' /proc/self/mountinfo
grep -q ' /dev/shm ' /proc/self/mountinfo
echo ok >/dev/null
test -d /usr/lib/x86_64-linux-gnu
exec "$0" /dev/dxg enum3:1:64 registry:1 close:all`
	tests := []struct {
		name  string
		extra []string
	}{
		{"namespace only", nil},
		{"with a host node too (--dev)", []string{"--dev", filepath.Join(t.TempDir(), "dxg")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before, err := os.ReadFile("/proc/self/mountinfo")
			if err != nil {
				t.Fatal(err)
			}
			tmpBefore, _ := filepath.Glob(filepath.Join(os.TempDir(), "dxgsim*"))
			args := append([]string{"--profile", p.Name, "--bind-host", root}, tt.extra...)
			r := tl.run(t, args, "sh", "-c", script, tl.probe)
			if r.code != 0 || !strings.Contains(r.stdout, p.Adapters[1].Folder) {
				t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
			}
			after, _ := os.ReadFile("/proc/self/mountinfo")
			if !bytes.Equal(before, after) {
				t.Errorf("the host's mount table changed:\nbefore:\n%s\nafter:\n%s", before, after)
			}
			for _, p := range []string{"/usr/lib/wsl", "/dev/dxg"} {
				if _, err := os.Lstat(p); err == nil {
					t.Errorf("%s appeared on the host", p)
				}
			}
			if tmpAfter, _ := filepath.Glob(filepath.Join(os.TempDir(), "dxgsim*")); len(tmpAfter) != len(tmpBefore) {
				t.Errorf("dxgsim left files in %s: %v", os.TempDir(), tmpAfter)
			}
			if len(tt.extra) > 0 {
				if _, err := os.Lstat(tt.extra[1]); err == nil {
					t.Errorf("--dev node %s left behind", tt.extra[1])
				}
			}
		})
	}
}

// dxgsim forwards SIGTERM to a long-running command and exits with its
// status; a command killed by a signal gives 128+N.
func TestSignals(t *testing.T) {
	tl := build(t, false)
	tests := []struct {
		name   string
		script string
		want   int
	}{
		{"command handles SIGTERM", `trap 'exit 7' TERM; echo ready; while :; do sleep 0.05; done`, 7},
		{"command dies of SIGTERM", `echo ready; exec sleep 1000`, 128 + int(syscall.SIGTERM)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dev := filepath.Join(t.TempDir(), "dxg")
			c := exec.Command(tl.sim, "--profile", "amd-desktop", "--dev", dev, "--", "sh", "-c", tt.script)
			out, err := c.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			line, _ := bufio.NewReader(out).ReadString('\n')
			if line != "ready\n" {
				c.Process.Kill()
				t.Fatalf("command said %q", line)
			}
			if err := c.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			err = c.Wait()
			ee, ok := err.(*exec.ExitError)
			if !ok || ee.ExitCode() != tt.want {
				t.Fatalf("dxgsim: %v, want exit %d", err, tt.want)
			}
			if _, err := os.Lstat(dev); err == nil {
				t.Error("device node left behind")
			}
		})
	}
}

// Command-line mistakes are refused with one line saying what to do.
func TestParseArgs(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string // "" means accepted
	}{
		{"minimal", []string{"--profile", "nvidia-laptop", "--dev", "/tmp/x", "--", "true"}, ""},
		{"bind-host alone", []string{"--profile", "nvidia-laptop", "--bind-host", "/h", "--", "true"}, ""},
		{"every fault", []string{"--profile", "intel-npu", "--dev", "d", "--fault", "old-kernel", "--fault", "query-fail=1",
			"--fault", "missing-folder=0", "--fault", "zero-adapters=", "--", "true"}, `fault "zero-adapters=" takes no value: use --fault zero-adapters`},
		{"no dev", []string{"--profile", "nvidia-laptop", "--", "true"}, "--dev PATH is required without --bind-host"},
		{"no profile", []string{"--dev", "d", "--", "true"}, "--profile is required (one of " + strings.Join(simhost.Names(), ", ") + ")"},
		{"unknown profile", []string{"--profile", "tesla", "--dev", "d", "--", "true"}, `unknown profile "tesla"`},
		{"no command", []string{"--profile", "nvidia-laptop", "--dev", "d"}, "no command: put it after --"},
		{"unknown fault", []string{"--profile", "nvidia-laptop", "--dev", "d", "--fault", "slow", "--", "true"},
			`unknown fault "slow" (known: old-kernel, query-fail=N, missing-folder=N, zero-adapters, denied, ntstatus, no-stats, no-stats-pid, stats-fail=N, stats-backwards)`},
		{"index missing", []string{"--profile", "nvidia-laptop", "--dev", "d", "--fault", "query-fail", "--", "true"},
			`fault "query-fail" needs an adapter index: --fault query-fail=N with N >= 0`},
		{"index out of range", []string{"--profile", "nvidia-laptop", "--dev", "d", "--fault", "missing-folder=2", "--", "true"},
			`fault missing-folder=2: profile "nvidia-laptop" has 2 adapters here (indexes 0..1 in host order, compute-only included)`},
		{"index with no adapters", []string{"--profile", "no-gpu", "--dev", "d", "--fault", "query-fail=0", "--", "true"},
			`fault query-fail=0: the simulated host reports no adapters (profile "no-gpu" or zero-adapters): drop the fault`},
		{"folder after a driver update", []string{"--profile", "nvidia-laptop", "--dev", "d", "--folder", "1=nvltwi.inf_amd64_00c0ffee00c0ffee", "--", "true"}, ""},
		{"folder without a name", []string{"--profile", "nvidia-laptop", "--dev", "d", "--folder", "1=", "--", "true"}, `--folder "1=": want N=NAME`},
		{"folder with a slash", []string{"--profile", "nvidia-laptop", "--dev", "d", "--folder", `1=a\b`, "--", "true"}, "without slashes"},
		{"folder out of range", []string{"--profile", "nvidia-laptop", "--dev", "d", "--folder", "2=x", "--", "true"}, "profile nvidia-laptop has 2 adapters"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			_, err := parseArgs(tt.args, &stderr)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if tt.want == "" && got != "" || tt.want != "" && !strings.Contains(got, tt.want) {
				t.Errorf("error %q, want %q", got, tt.want)
			}
		})
	}
}

// TestParseFolder: --folder changes what this run reports, as a driver
// update does, and never the shared profile.
func TestParseFolder(t *testing.T) {
	var stderr bytes.Buffer
	o, err := parseArgs([]string{"--profile", "nvidia-laptop", "--dev", "d", "--folder", "1=nvltwi.inf_amd64_00c0ffee00c0ffee", "--", "true"}, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	a := o.cfg.Profile.Adapters[1]
	if a.Folder != "nvltwi.inf_amd64_00c0ffee00c0ffee" || a.DriverStorePath != `C:\Windows\System32\DriverStore\FileRepository\nvltwi.inf_amd64_00c0ffee00c0ffee` {
		t.Errorf("adapter 1 reports %q at %q", a.Folder, a.DriverStorePath)
	}
	p, _ := simhost.Lookup("nvidia-laptop")
	if p.Adapters[1].Folder == a.Folder {
		t.Error("--folder changed the shared profile")
	}
}

func TestExitStatuses(t *testing.T) {
	tl := build(t, false)
	dev := filepath.Join(t.TempDir(), "dxg")
	tests := []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"command not found", []string{"--profile", "nvidia-laptop", "--dev", dev, "--", "no-such-command-dxgsim"}, exitNotFound,
			"dxgsim: exec: \"no-such-command-dxgsim\": executable file not found in $PATH\n"},
		{"bad fault", []string{"--profile", "nvidia-laptop", "--dev", dev, "--fault", "query-fail=9", "--", "true"}, exitSetup,
			"dxgsim: fault query-fail=9: profile \"nvidia-laptop\" has 2 adapters here (indexes 0..1 in host order, compute-only included)\n"},
		{"existing file at --dev", []string{"--profile", "nvidia-laptop", "--dev", "/etc/hostname", "--", "true"}, exitSetup,
			"dxgsim: --dev /etc/hostname: refusing to replace an existing file that is not a simulated dxg node (char 10:229): pick another path\n"},
		{"command status", []string{"--profile", "nvidia-laptop", "--dev", dev, "--", "sh", "-c", "exit 4"}, 4, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := exec.Command(tl.sim, tt.args...)
			var errb bytes.Buffer
			c.Stderr = &errb
			err := c.Run()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			}
			if code != tt.code || errb.String() != tt.stderr {
				t.Errorf("exit %d stderr %q, want %d %q", code, errb.String(), tt.code, tt.stderr)
			}
		})
	}
}

// Many processes at once, as fifty container starts are: every call is
// answered, each process gets its own handles, and the counts add up.
func TestConcurrentCallers(t *testing.T) {
	tl := build(t, false)
	const n, par = 300, 50
	dir := t.TempDir()
	node, reportPath := filepath.Join(dir, "dxg"), filepath.Join(dir, "report.json")
	script := fmt.Sprintf(`seq 1 %d | xargs -P %d -I{} %s %s enum3:1:64 registry:1 close:all | grep -c '"op":"close:all","ret":0,"errno":0'`, n, par, tl.probe, node)
	r := tl.run(t, []string{"--profile", "nvidia-laptop", "--dev", node, "--report", reportPath}, "sh", "-c", script)
	if r.code != 0 || strings.TrimSpace(r.stdout) != fmt.Sprint(n) {
		t.Fatalf("exit %d, %s clean runs of %d\nstderr: %s", r.code, strings.TrimSpace(r.stdout), n, r.stderr)
	}
	var rep report
	data, err := os.ReadFile(reportPath)
	if err == nil {
		err = json.Unmarshal(data, &rep)
	}
	if err != nil {
		t.Fatal(err)
	}
	// Per process: enum3, two registry queries, two closes.
	want := map[string]uint64{"ENUMADAPTERS3": n, "QUERYADAPTERINFO": 2 * n, "CLOSEADAPTER": 2 * n}
	if fmt.Sprint(rep.Calls) != fmt.Sprint(want) || rep.HandlesOpened != 2*n || rep.HandlesOpen != 0 || len(rep.Failures) != 0 {
		t.Errorf("report calls %v failures %v handles %d/%d", rep.Calls, rep.Failures, rep.HandlesOpened, rep.HandlesOpen)
	}
}
