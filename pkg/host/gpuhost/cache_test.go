package gpuhost

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/devnode"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/dxcore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/probecache"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/emulated"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/fixture"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/simhost"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/testbin"
)

// envProbeChild carries a probeChild's setup into the test binary re-run
// under dxgsim.
const envProbeChild = "GPUHOST_PROBE_CHILD"

type probeSetup struct{ Dev, Lib, Drivers, Cache, Sonames, Sysfs string }

// probeResult is what one start's probe said.
type probeResult struct {
	Hit     bool
	Miss    string
	Folders []string
	Ldcache []string      // the loader entries' keys
	Notes   []string      // what Options.Note heard
	Took    time.Duration // Probe's wall time in the child
}

// TestProbeChild is the re-run under dxgsim: one start's Probe.
func TestProbeChild(t *testing.T) {
	env := os.Getenv(envProbeChild)
	if env == "" {
		t.Skip("run by TestProbeCacheUnderDxgsim")
	}
	var s probeSetup
	if err := json.Unmarshal([]byte(env), &s); err != nil {
		t.Fatal(err)
	}
	node, err := devnode.Stat(s.Dev)
	if err != nil {
		t.Fatal(err)
	}
	var r probeResult
	begin := time.Now()
	h, skipped, err := Probe(node, Options{LibDir: s.Lib, DriversDir: s.Drivers,
		Ldcache: true, ShortLived: true, CacheDir: s.Cache, SonameCache: s.Sonames, Sysfs: s.Sysfs,
		Note: func(err error) { r.Notes = append(r.Notes, err.Error()) },
		Cached: func(hit bool, miss error) {
			r.Hit = hit
			if miss != nil {
				r.Miss = miss.Error()
			}
		}})
	r.Took = time.Since(begin)
	if err != nil || len(skipped) > 0 {
		t.Fatalf("probe: %v, skipped %v", err, skipped)
	}
	for _, f := range h.Inventory.Folders {
		r.Folders = append(r.Folders, f.Name)
	}
	for _, e := range h.Ldcache {
		r.Ldcache = append(r.Ldcache, e.Key)
	}
	data, _ := json.Marshal(r)
	fmt.Printf("\nRESULT %s\n", data)
}

// Round-trip budgets of one start's probe on the nvidia-laptop host (two
// adapters): what reaches the Windows host on WSL. A warm start reads the
// devices the GPU driver is bound to in sysfs (guest-local) and stats the
// lib dir and the drivers dir (one GETATTR each: they are the mounts'
// roots, as on WSL); without a usable sysfs reading it lists the adapters
// too (one ioctl, and the process object that opening /dev/dxg makes on
// the host); a cold one also queries each adapter twice (ids, driver store
// path), walks to each folder and scans the lib dir (18 libraries: lookup,
// open, getattrs (one for the FileID kept with its SONAME), read, flush and
// release each); the first one after a boot finds the SONAMEs kept on disk
// and only stats each library (lookup, getattr). The probe tests hold the
// probe to them so they cannot creep up unnoticed; bench-start reports the
// whole start's.
// Host round trips count the process's dxg process object too: the
// driver makes it on the host when the process opens /dev/dxg and destroys
// it when the process closes its last dxg file (dxgsim models both).
var (
	budgetWarm       = budget{ioctls: 0, host: 0, fs: 2}
	budgetWarmListed = budget{ioctls: 1, host: 2, fs: 2}
	budgetCold       = budget{ioctls: 5, host: 6, fs: 157}
	budgetBoot       = budget{ioctls: 5, host: 6, fs: 49}
)

type budget struct{ ioctls, host, fs uint64 }

// checkStart holds one start to what it should have said (a hit or a miss,
// the folders) and to its budget: the warm one given for a hit, the cold
// one for a miss, which must have asked the host.
func checkStart(t *testing.T, r probeResult, calls, fs map[string]uint64, hit bool, warm budget, folders ...string) {
	t.Helper()
	if r.Hit != hit || !slices.Equal(r.Folders, folders) {
		t.Errorf("probe: hit %v (miss %q), folders %v; want hit %v, folders %v", r.Hit, r.Miss, r.Folders, hit, folders)
	}
	var got budget
	for name, n := range calls {
		if !strings.HasPrefix(name, processObject) {
			got.ioctls += n
		}
	}
	// The process's dxg process object: made on the host at its open,
	// destroyed at its close, both VM-bus round trips.
	got.host = calls["QUERYADAPTERINFO"] + calls[processObject+"created"] + calls[processObject+"destroyed"]
	got.fs = fs["total"]
	max := budgetCold
	if hit {
		max = warm
	}
	t.Logf("hit %v: %d ioctls (%d to the host) %v; %d file system requests %v", hit, got.ioctls, got.host, calls, got.fs, fs)
	if got.ioctls > max.ioctls || got.host > max.host || got.fs > max.fs {
		t.Errorf("over budget (hit %v): %d ioctls (budget %d), %d to the host (budget %d), %d file system requests (budget %d): %v %v",
			hit, got.ioctls, max.ioctls, got.host, max.host, got.fs, max.fs, calls, fs)
	}
	if !hit && got.host == 0 {
		t.Errorf("a miss sent no host query: %v", calls)
	}
}

// TestProbeCacheUnderDxgsim: starts under the simulator, with the lib dir
// and drivers dir served by test/latencyfs (which counts every request),
// answer from the cache without opening /dev/dxg once it is warm, within
// the round-trip budgets; a driver update (a new folder in the driver
// store, which the host then names) or a corrupt cache file makes the next
// start ask the host and see the new folder. Root: dxgsim makes a device
// node and installs a seccomp listener, latencyfs mounts.
func TestProbeCacheUnderDxgsim(t *testing.T) {
	skipUnlessProbeParent(t)
	w := newProbeWorld(t, 0)
	start := w.start
	root := w.root
	intel, nv := "iigd_dch.inf_amd64_ba2ab4a3e0e0b2ea", "nvltwi.inf_amd64_7b2a5c1c4e6f8d90"
	check := func(t *testing.T, r probeResult, calls, fs map[string]uint64, hit bool, folders ...string) {
		t.Helper()
		checkStart(t, r, calls, fs, hit, budgetWarm, folders...)
	}
	r, calls, fs := start(t)
	check(t, r, calls, fs, false, intel, nv)
	r, calls, fs = start(t)
	check(t, r, calls, fs, true, intel, nv)

	// A driver update: the new folder appears in the store, the host
	// names it, the LUIDs stay (dxgsim keeps them; a real host would
	// not).
	updated := "nvltwi.inf_amd64_1111111111111111"
	if err := os.Mkdir(filepath.Join(root, fixture.DriversDir, updated), 0o755); err != nil {
		t.Fatal(err)
	}
	r, calls, fs = start(t, "--folder", "1="+updated)
	check(t, r, calls, fs, false, intel, updated)
	r, calls, fs = start(t, "--folder", "1="+updated)
	check(t, r, calls, fs, true, intel, updated)

	// A cache file cut in half is ignored and replaced.
	files, _ := filepath.Glob(filepath.Join(w.s.Cache, probecache.Glob))
	if len(files) != 1 {
		t.Fatalf("cache files %v, want one", files)
	}
	data, _ := os.ReadFile(files[0])
	if err := os.WriteFile(files[0], data[:len(data)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	r, calls, fs = start(t, "--folder", "1="+updated)
	check(t, r, calls, fs, false, intel, updated)
	r, calls, fs = start(t, "--folder", "1="+updated)
	check(t, r, calls, fs, true, intel, updated)
}

// TestProbeCacheSysfs: what the warm start reads instead of asking
// /dev/dxg is never trusted past a change of the adapters. Windows removes
// an adapter (its PCI device and channel leave sysfs, the driver stops
// listing it), brings it back, restarts it with a new LUID (its channel's
// instance GUID changes): each makes the next start ask the host and see
// the adapters as they are, and the start after it is warm again without
// opening /dev/dxg. A sysfs whose channels do not name the listed LUIDs (a
// kernel without dxgkrnl's convention) is never used in place of the
// listing: those starts list the adapters. Root, as above.
func TestProbeCacheSysfs(t *testing.T) {
	skipUnlessProbeParent(t)
	w := newProbeWorld(t, 0)
	p, err := simhost.Lookup("nvidia-laptop")
	if err != nil {
		t.Fatal(err)
	}
	intel, nv := "iigd_dch.inf_amd64_ba2ab4a3e0e0b2ea", "nvltwi.inf_amd64_7b2a5c1c4e6f8d90"
	removed := filepath.Join(t.TempDir(), "removed")
	setHost := func(t *testing.T, gone []int, luids map[int]dxcore.LUID, sysfsLUIDs map[int]dxcore.LUID) []string {
		t.Helper()
		var lines string
		for _, i := range gone {
			lines += fmt.Sprintf("%d\n", i)
		}
		if err := os.WriteFile(removed, []byte(lines), 0o644); err != nil {
			t.Fatal(err)
		}
		if sysfsLUIDs == nil {
			sysfsLUIDs = luids
		}
		if err := fixture.SysfsDevices(w.s.Sysfs, p, gone, sysfsLUIDs); err != nil {
			t.Fatal(err)
		}
		args := []string{"--removed-file", removed}
		for i, l := range luids {
			args = append(args, "--luid", fmt.Sprintf("%d=%#x", i, l.Uint64()))
		}
		return args
	}
	steps := []struct {
		name             string
		gone             []int
		luids, sysfsOnly map[int]dxcore.LUID
		folders          []string
		warm             budget // a warm start's
	}{
		{"as built", nil, nil, nil, []string{intel, nv}, budgetWarm},
		{"NVIDIA adapter removed", []int{1}, nil, nil, []string{intel}, budgetWarm},
		{"NVIDIA adapter back", nil, nil, nil, []string{intel, nv}, budgetWarm},
		{"NVIDIA adapter restarted with a new LUID", nil, map[int]dxcore.LUID{1: {Low: 0x4486d2}}, nil, []string{intel, nv}, budgetWarm},
		{"sysfs names other LUIDs", nil, nil, map[int]dxcore.LUID{1: {Low: 0x777}}, []string{intel, nv}, budgetWarmListed},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			args := setHost(t, s.gone, s.luids, s.sysfsOnly)
			r, calls, fs := w.start(t, args...)
			checkStart(t, r, calls, fs, false, s.warm, s.folders...)
			for range 2 {
				r, calls, fs = w.start(t, args...)
				checkStart(t, r, calls, fs, true, s.warm, s.folders...)
				// Under the budget is not enough here: a start that may
				// not trust sysfs must have listed the adapters.
				if listed := calls["ENUMADAPTERS3"] == 1; listed != (s.warm == budgetWarmListed) {
					t.Errorf("warm start listed the adapters: %v, want %v (%v)", listed, s.warm == budgetWarmListed, calls)
				}
			}
		})
	}
	// The cache the last step made has no reading. Once sysfs names the
	// adapters again, one start still lists them (the LUIDs match: a
	// hit) and keeps the reading; the next leaves /dev/dxg closed.
	t.Run("sysfs usable again", func(t *testing.T) {
		args := setHost(t, nil, nil, nil)
		for i, want := range []uint64{1, 0} {
			r, calls, fs := w.start(t, args...)
			checkStart(t, r, calls, fs, true, budgetWarmListed, intel, nv)
			if calls["ENUMADAPTERS3"] != want {
				t.Errorf("start %d listed the adapters %d times, want %d (%v)", i, calls["ENUMADAPTERS3"], want, calls)
			}
		}
	})
}

// TestProbeCacheRollback: a driver rolled back to a folder still in the
// driver store, under a warm cache made after the update. Windows restarts
// the adapter to change its driver: the adapter's VM-bus channel is offered
// again, a new sysfs entry even where the LUID is kept, so the next start
// asks the host and binds the folder it names now. A rollback that changed
// nothing the guest can see (the same LUID, the same channel entry, the
// store untouched) is not seen without asking the host.
// Root, as above.
func TestProbeCacheRollback(t *testing.T) {
	skipUnlessProbeParent(t)
	w := newProbeWorld(t, 0)
	p, err := simhost.Lookup("nvidia-laptop")
	if err != nil {
		t.Fatal(err)
	}
	intel, old, updated := "iigd_dch.inf_amd64_ba2ab4a3e0e0b2ea", "nvltwi.inf_amd64_7b2a5c1c4e6f8d90", "nvltwi.inf_amd64_1111111111111111"
	folders := filepath.Join(t.TempDir(), "folders")
	names := func(t *testing.T, name string) {
		t.Helper()
		if err := os.WriteFile(folders, []byte("1="+name+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	args := []string{"--folder-file", folders}
	// The update: a new folder in the store, which the host names.
	if err := os.Mkdir(filepath.Join(w.root, fixture.DriversDir, updated), 0o755); err != nil {
		t.Fatal(err)
	}
	names(t, updated)
	r, calls, fs := w.start(t, args...)
	checkStart(t, r, calls, fs, false, budgetWarm, intel, updated)
	r, calls, fs = w.start(t, args...)
	checkStart(t, r, calls, fs, true, budgetWarm, intel, updated)

	// The rollback: the host names the old folder again, both stay in the
	// store, the adapter restarts with its LUID.
	names(t, old)
	if err := fixture.SysfsDevices(w.s.Sysfs, p, nil, nil); err != nil {
		t.Fatal(err)
	}
	r, calls, fs = w.start(t, args...)
	checkStart(t, r, calls, fs, false, budgetWarm, intel, old)
	r, calls, fs = w.start(t, args...)
	checkStart(t, r, calls, fs, true, budgetWarm, intel, old)
}

// skipUnlessProbeParent skips a probe test in the re-run child, and without
// root (dxgsim makes a device node and installs a seccomp listener).
func skipUnlessProbeParent(t *testing.T) {
	t.Helper()
	if os.Getenv(envProbeChild) != "" {
		t.Skip("in the child")
	}
	if os.Geteuid() != 0 {
		t.Skip("dxgsim needs root")
	}
	emulated.Skip(t, "dxgsim answering this test binary started again")
}

// probeWorld is the nvidia-laptop host under dxgsim with its lib dir and
// drivers dir served by latencyfs, both with latency per host request.
type probeWorld struct {
	dxgsim, root string
	latency      time.Duration
	s            probeSetup
	fsCounts     func(testing.TB) map[string]uint64
}

func newProbeWorld(tb testing.TB, latency time.Duration) *probeWorld {
	tb.Helper()
	bin := tb.TempDir()
	dxgsim, err := testbin.Dxgsim(bin)
	if err != nil {
		tb.Fatal(err)
	}
	w := &probeWorld{dxgsim: dxgsim, root: fixture.Host(tb, "nvidia-laptop", fixture.Options{Stubs: true}), latency: latency}
	mnt := tb.TempDir()
	w.s = probeSetup{Dev: filepath.Join(tb.TempDir(), "dxg"), Lib: filepath.Join(mnt, "lib"), Drivers: filepath.Join(mnt, "drivers"),
		Cache: filepath.Join(tb.TempDir(), "cache"), Sonames: tb.TempDir(), Sysfs: filepath.Join(tb.TempDir(), "sys")}
	p, err := simhost.Lookup("nvidia-laptop")
	if err != nil {
		tb.Fatal(err)
	}
	if err := fixture.SysfsDevices(w.s.Sysfs, p, nil, nil); err != nil {
		tb.Fatal(err)
	}
	w.fsCounts = serveCounted(tb, bin, latency, filepath.Join(w.root, fixture.LibDir)+":"+w.s.Lib, filepath.Join(w.root, fixture.DriversDir)+":"+w.s.Drivers)
	return w
}

// start runs one start's probe under dxgsim and returns what it said, the
// ioctls dxgsim counted and the file system requests latencyfs counted.
func (w *probeWorld) start(tb testing.TB, extra ...string) (probeResult, map[string]uint64, map[string]uint64) {
	tb.Helper()
	setup, _ := json.Marshal(w.s)
	rep := filepath.Join(tb.TempDir(), "report.json")
	args := append([]string{"--profile", "nvidia-laptop", "--dev", w.s.Dev, "--report", rep, "--host-latency", w.latency.String()}, extra...)
	args = append(args, "--", os.Args[0], "-test.run=^TestProbeChild$", "-test.count=1")
	cmd := exec.Command(w.dxgsim, args...)
	cmd.Env = append(os.Environ(), envProbeChild+"="+string(setup))
	w.fsCounts(tb)
	out, err := cmd.CombinedOutput()
	fs := w.fsCounts(tb)
	if err != nil {
		tb.Fatalf("dxgsim: %v\n%s", err, out)
	}
	var r probeResult
	for _, l := range strings.Split(string(out), "\n") {
		if res, ok := strings.CutPrefix(l, "RESULT "); ok {
			if err := json.Unmarshal([]byte(res), &r); err != nil {
				tb.Fatal(err)
			}
		}
	}
	var report struct {
		Calls                                map[string]uint64
		ProcessesCreated, ProcessesDestroyed uint64
	}
	data, err := os.ReadFile(rep)
	if err == nil {
		err = json.Unmarshal(data, &report)
	}
	if err != nil {
		tb.Fatal(err)
	}
	report.Calls[processObject+"created"] = report.ProcessesCreated
	report.Calls[processObject+"destroyed"] = report.ProcessesDestroyed
	return r, report.Calls, fs
}

// processObject prefixes the entries start adds to dxgsim's ioctl counts:
// the driver's process object for the started process, which is no ioctl.
const processObject = "process object "

// BenchmarkProbe times one start's Probe (inside the started process, so
// runc and process start-up stay out), cold and warm, with the lib dir and
// drivers dir over latencyfs: without latency, and on bench-start's latency
// host (100 us per file system request and per dxg call to the host). Root.
func BenchmarkProbe(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("dxgsim needs root")
	}
	for _, lat := range []time.Duration{0, 100 * time.Microsecond} {
		b.Run("latency="+lat.String(), func(b *testing.B) { benchmarkProbe(b, lat) })
	}
}

func benchmarkProbe(b *testing.B, latency time.Duration) {
	w := newProbeWorld(b, latency)
	var cold, warm []time.Duration
	for b.Loop() {
		files, _ := filepath.Glob(filepath.Join(w.s.Cache, probecache.Glob))
		for _, f := range files {
			os.Remove(f)
		}
		r, _, _ := w.start(b)
		cold = append(cold, r.Took)
		r, _, _ = w.start(b)
		if !r.Hit {
			b.Fatalf("warm start missed: %s", r.Miss)
		}
		warm = append(warm, r.Took)
	}
	med := func(ds []time.Duration) float64 {
		slices.Sort(ds)
		return float64(ds[len(ds)/2]) / float64(time.Millisecond)
	}
	b.ReportMetric(med(cold), "cold-ms")
	b.ReportMetric(med(warm), "warm-ms")
}

// serveCounted builds test/latencyfs (a module of its own) into bin, serves
// each SRC:MNT through it without delay and returns a function that takes
// its request counts since the last call.
func serveCounted(t testing.TB, bin string, latency time.Duration, mounts ...string) func(t testing.TB) map[string]uint64 {
	t.Helper()
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skip("no /dev/fuse: test/latencyfs cannot mount")
	}
	root, err := testbin.Root()
	if err != nil {
		t.Fatal(err)
	}
	lfs := filepath.Join(bin, "latencyfs")
	build := exec.Command("go", "build", "-o", lfs, ".")
	build.Dir = filepath.Join(root, "test", "latencyfs")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build test/latencyfs: %v\n%s", err, out)
	}
	for _, m := range mounts {
		if err := os.MkdirAll(m[strings.IndexByte(m, ':')+1:], 0o755); err != nil {
			t.Fatal(err)
		}
	}
	sock := filepath.Join(bin, "latencyfs.sock")
	cmd := exec.Command(lfs, append([]string{"--latency", latency.String(), "--control", sock}, mounts...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})
	ready := make([]byte, 6)
	if _, err := io.ReadFull(out, ready); err != nil || string(ready) != "ready\n" {
		t.Fatalf("latencyfs did not start: %q %v", ready, err)
	}
	return func(t testing.TB) map[string]uint64 {
		t.Helper()
		conn, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		var c map[string]uint64
		if err := json.NewDecoder(conn).Decode(&c); err != nil {
			t.Fatal(err)
		}
		return c
	}
}

// TestSonamesAcrossBoots: the first start after a boot (the probe cache
// gone, the SONAMEs kept on disk) reads no library of the lib dir, only
// stats them, and makes the same loader entries as a start that read them;
// a library replaced meanwhile is read again, and only it; a SONAME file
// that cannot be trusted is said so, every library is read and the file is
// replaced. Two libraries of the lib dir are real ones (the machine's libc
// and libm, later swapped), so a SONAME answered from a stale file would
// show in the entries. Root, as above.
func TestSonamesAcrossBoots(t *testing.T) {
	skipUnlessProbeParent(t)
	libc, libm := "/lib/x86_64-linux-gnu/libc.so.6", "/lib/x86_64-linux-gnu/libm.so.6"
	for _, p := range []string{libc, libm} {
		if _, err := os.Stat(p); err != nil {
			t.Skipf("no %s to serve as a library: %v", p, err)
		}
	}
	w := newProbeWorld(t, 0)
	intel, nv := "iigd_dch.inf_amd64_ba2ab4a3e0e0b2ea", "nvltwi.inf_amd64_7b2a5c1c4e6f8d90"
	lib := filepath.Join(w.root, fixture.LibDir)
	candidates := 0
	ents, err := os.ReadDir(lib)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "lib") && strings.Contains(e.Name(), ".so") && e.Type().IsRegular() {
			candidates++
		}
	}
	put := func(t *testing.T, name, from string) {
		t.Helper()
		data, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(lib, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	put(t, "libcuda.so.1.1", libc)
	put(t, "libnvidia-ml.so.1", libm)
	reboot := func(t *testing.T) {
		t.Helper()
		files, _ := filepath.Glob(filepath.Join(w.s.Cache, probecache.Glob))
		for _, f := range files {
			if err := os.Remove(f); err != nil {
				t.Fatal(err)
			}
		}
	}
	// boot is one first start after a boot: a miss that sees both
	// folders, makes entries for exactly the SONAMEs in want and opens
	// (reads) open files of the lib dir.
	boot := func(t *testing.T, open uint64, want ...string) probeResult {
		t.Helper()
		reboot(t)
		r, calls, fs := w.start(t)
		if r.Hit || !slices.Equal(r.Folders, []string{intel, nv}) {
			t.Errorf("probe: hit %v, folders %v; want a miss, folders %v", r.Hit, r.Folders, []string{intel, nv})
		}
		if n := calls["QUERYADAPTERINFO"]; n != 4 {
			t.Errorf("%d adapter queries, want 4 (%v)", n, calls)
		}
		slices.Sort(r.Ldcache)
		if !slices.Equal(r.Ldcache, want) {
			t.Errorf("loader entries %v, want %v", r.Ldcache, want)
		}
		if fs["OPEN"] != open {
			t.Errorf("%d files of the lib dir read, want %d (%v)", fs["OPEN"], open, fs)
		}
		if open == 0 && fs["total"] > budgetBoot.fs {
			t.Errorf("%d file system requests, over the budget of a first start after a boot (%d): %v", fs["total"], budgetBoot.fs, fs)
		}
		return r
	}
	t.Logf("%d candidate files in the lib dir", candidates)
	if r := boot(t, uint64(candidates), "libc.so.6", "libm.so.6"); len(r.Notes) != 0 {
		t.Errorf("notes on a first start: %v", r.Notes)
	}
	boot(t, 0, "libc.so.6", "libm.so.6")
	boot(t, 0, "libc.so.6", "libm.so.6")

	// A driver update replaces a library: only it is read again.
	put(t, "libcuda.so.1.1", libm)
	put(t, "libnvidia-ml.so.1", libc)
	boot(t, 2, "libc.so.6", "libm.so.6")
	put(t, "libcuda.so.1.1", "/dev/null")
	boot(t, 1, "libc.so.6")
	boot(t, 0, "libc.so.6")

	files, _ := filepath.Glob(filepath.Join(w.s.Sonames, probecache.SonamesGlob))
	if len(files) != 1 {
		t.Fatalf("SONAME files %v, want one", files)
	}
	if err := os.WriteFile(files[0], []byte("WSLGPUSN\x01\x00\x00\x00garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := boot(t, uint64(candidates), "libc.so.6")
	if len(r.Notes) != 1 || !strings.Contains(r.Notes[0], "kept SONAMEs not used") {
		t.Errorf("notes on a start with a garbage SONAME file: %v", r.Notes)
	}
	boot(t, 0, "libc.so.6")
}
