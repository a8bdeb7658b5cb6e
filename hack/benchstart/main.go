// Command benchstart measures what the hook adds to a container start: it
// runs `runc run` of a container running /bin/true several ways,
// alternately, on the simulated NVIDIA laptop host (dxgsim + test/fixture),
// each on a fresh overlay root file system on disk, and prints medians,
// ratios and, for one start of each, the round trips to the Windows host it
// causes.
//
//	plain   runc alone
//	hook    runc with wsl-gpu-hook as a prestart hook, WSL_GPU_DEVICES=all,
//	        its probe cache warm (the state of every start but the first
//	        after a boot or a driver update)
//	cold    the same with the probe cache and the kept SONAMEs removed
//	        before each start: nothing cached (the first start ever, or
//	        after an update of the lib dir)
//	boot    the same with only the probe cache removed: the first start
//	        after WSL boots its VM, which finds the lib dir's SONAMEs kept
//	        on disk (soname_cache)
//	cdihook the shape of our CDI spec (wsl-gpu-hook cdi generate): /dev/dxg
//	        and the lib dir from the engine, and wsl-gpu-hook cdi-hook as
//	        the createContainer hook that mounts the selected folders
//	wrapper runc run through wsl-gpu-runtime (the hook binary as the OCI
//	        runtime wrapper), which adds the GPU and runs runc
//	true    runc running /bin/true as the prestart hook: what any hook
//	        costs a start (runc's fork, exec and wait)
//	emptygo runc running an empty static Go program as the prestart hook
//	        (hack/benchstart/emptyhook): what any Go hook costs, the floor
//	        the hook's own work adds to
//	nvcdi   what NVIDIA's WSL CDI spec makes runc do, built from the same
//	        fixture: /dev/dxg with its rule, every file of the NVIDIA driver
//	        folder and libdxcore.so bound read-only one by one, and a
//	        createContainer hook that runs the host's ldconfig -r on the
//	        root file system as nvidia-cdi-hook update-ldcache does
//
// Two hosts, one after the other (--hosts):
//
//	plain   the fixture tree on the work dir's disk, dxgsim answering at
//	        once: the start cost as CPU
//	latency the lib dir and the drivers dir served by test/latencyfs (FUSE)
//	        with --fs-latency per request, and dxgsim delaying each call WSL
//	        forwards to the host by --dxg-latency: the start cost as the VM
//	        boundary shapes it (defaults and their sources at
//	        defaultFSLatency)
//
// Then the hook process alone: the hook, cold and warm (and --compare's
// binary), the empty Go hook, and the floor of a warm start (floorhook: the
// same round trips, cgroup rule, namespace entry, node, binds and files as
// the hook's warm start, every decision made beforehand from one run of
// the hook, its first run checked to have made them all), exec'd the way
// runc runs a prestart hook, with a created container's state on stdin,
// each run on a fresh root and a fresh mount namespace as a first start
// has: wall time, and the CPU time
// and page faults the kernel accounted to the process, which a loaded
// machine disturbs much less. --alone-only measures only that; --trace V
// --wrap CMD [--trace-runs N] runs one of them under strace, perf and the
// like instead.
//
// Round trips are counted on one extra start of each variant: dxg ioctls by
// dxgsim (its --report; QUERYADAPTERINFO is the host-bound one) and file
// system requests by latencyfs (latency host only; each is a round trip to
// the Windows file server on WSL). Both are deterministic.
//
// Run it as root through `make bench-start` (hack/bench-start.sh). It
// re-runs itself under dxgsim so that the hook's ioctls reach the
// simulator; the filter costs runc nothing, as it only stops dxg ioctls.
// It is a test tool: it is never shipped.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/config"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/setup/cdispec"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/wsl"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/cdiselect"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/fixture"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/simhost"
)

const (
	profileName = "nvidia-laptop"
	// envWork names the prepared work dir in the re-runs under dxgsim.
	envWork = "WSL_GPU_BENCH_WORK"
	// cgroupParent holds every bench container's cgroup.
	cgroupParent = "wsl-gpu-hook-bench"
	// debianTarball is the image test/e2e caches (images_test.go).
	debianTarball = "debian-bookworm-minbase-v1.tar"
)

// The latency host's defaults.
//
// defaultFSLatency is one request to WSL's 9p file server on Windows. Two
// public measurements bound it: microsoft/WSL#9430 (Windows 11, 2023) times
// 1000 rounds of open-write-close, open-read-close and stat of a file on
// /mnt/c at 1.50 s, 1.5 ms a round of about 13 9p requests (walk, open,
// write, clunk, walk, open, read, clunk, walk, getattr, clunk and two
// getattrs), about 115 us each; microsoft/wslg#264 (2021) measures one
// stat() of an NTFS file from WSL2 at 900-1100 us, a walk, a getattr and a
// clunk, about 300 us each. The lower figure is taken, so the benchmark
// does not flatter a change that saves round trips.
//
// defaultDxgLatency is one QUERYADAPTERINFO to the Windows host: a
// synchronous VM-bus message to dxgkrnl on Windows. No public measurement
// of it was found; it is taken equal to a 9p request, which is also a
// VM-bus round trip to a Windows service (the file server), and is a flag.
//
// Both are waited out by test/hostdelay, to within tens of microseconds:
// up to c3fc53c they were time.Sleep, which made each 100 us a millisecond.
const (
	defaultFSLatency  = 100 * time.Microsecond
	defaultDxgLatency = 100 * time.Microsecond
)

type options struct {
	runs       int
	hook       string // the hook binary to measure
	compare    string // another hook binary, measured alongside: "" for none
	empty      string // the empty Go hook (emptyhook): "" leaves the floors out
	dxgcall    string // the empty Go hook plus the warm start's one dxg call (dxgcall): "" leaves it out
	floor      string // the floor of a warm start (floorhook): "" leaves it out
	dxgsim     string
	latencyfs  string // test/latencyfs: needed for the latency host
	hosts      string
	fsLatency  time.Duration
	dxgLatency time.Duration
	cache      string // test/e2e's cache: the Debian image and fixture objects
	workDir    string // parent of the work dir: on disk, not tmpfs
	keep       bool
	// In the re-runs under dxgsim:
	host  string // the host measured
	count string // count one start of this variant instead of timing
	// trace runs this hook-alone variant once under wrap, instead of the
	// counts and the timing.
	trace     string
	wrap      string
	traceRuns int
	// aloneOnly measures only the hook process alone (no runc starts, no
	// counts): the quick, CPU-time view of a change.
	aloneOnly bool
}

func main() {
	var o options
	flag.IntVar(&o.runs, "runs", 21, "runs of each variant")
	flag.StringVar(&o.hook, "hook", "", "wsl-gpu-hook binary to measure (required)")
	flag.StringVar(&o.dxgsim, "dxgsim", "", "dxgsim binary (required)")
	flag.StringVar(&o.latencyfs, "latencyfs", "", "test/latencyfs binary (required for the latency host)")
	flag.StringVar(&o.hosts, "hosts", "plain,latency", "hosts to measure, one after the other: plain, latency")
	flag.DurationVar(&o.fsLatency, "fs-latency", defaultFSLatency, "latency host: delay of each file system request to the lib dir and drivers dir (WSL's 9p; see defaultFSLatency)")
	flag.DurationVar(&o.dxgLatency, "dxg-latency", defaultDxgLatency, "latency host: delay of each dxg call WSL forwards to the Windows host (see defaultDxgLatency)")
	flag.StringVar(&o.empty, "empty", "", "the empty Go hook (hack/benchstart/emptyhook): adds the floor variants true and emptygo")
	flag.StringVar(&o.floor, "floor", "", "the floor of a warm start (hack/benchstart/floorhook): adds the hook-alone variant floor")
	flag.StringVar(&o.dxgcall, "dxgcall", "", "the empty Go hook plus one dxg call (hack/benchstart/dxgcall): adds the hook-alone variant dxgcall")
	flag.StringVar(&o.compare, "compare", "", "a second hook binary (an older build, say), run as another variant \"compare\"")
	flag.StringVar(&o.cache, "cache", "/var/cache/wsl-gpu-hook-e2e", "test/e2e's cache: the Debian minbase image and the fixture's compiled objects")
	flag.StringVar(&o.workDir, "workdir", "/var/tmp", "where the work dir goes: a disk file system, as container storage is")
	flag.BoolVar(&o.keep, "keep", false, "keep the work dir")
	flag.StringVar(&o.host, "host", "", "internal: the host of a re-run under dxgsim")
	flag.StringVar(&o.count, "count", "", "internal: count one start of this variant")
	flag.StringVar(&o.trace, "trace", "", "run this hook-alone `VARIANT` (emptygo, hook, boot, cold, binary, compare, floor) once, warm, under --wrap, instead of measuring")
	flag.BoolVar(&o.aloneOnly, "alone-only", false, "measure only the hook process alone (its wall and CPU time next to the empty Go hook), not the container starts")
	flag.IntVar(&o.traceRuns, "trace-runs", 1, "with --trace: runs of the variant (a system-wide perf record around them collects many)")
	flag.StringVar(&o.wrap, "wrap", "", "with --trace: the `COMMAND` (split on spaces) to run the hook under, e.g. \"strace -f -tt -T -o /tmp/hook.strace\" or \"perf stat -r 20\"")
	flag.Parse()
	var err error
	if w := os.Getenv(envWork); w != "" {
		err = child(w, o)
	} else {
		err = prepareAndRun(o)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench-start: %v\n", err)
		os.Exit(1)
	}
}

// host is one simulated host's paths in the work dir.
type host struct {
	name               string
	libDir, driversDir string // what the hook's config and NVIDIA's binds use
	config             string // the hook's config for this host
	cacheDir           string // its probe_cache
	// coldConfig and coldCacheDir are the cold variant's: emptying its
	// cache before each start must not make the warm variants (hook, a
	// --compare binary that may keep another file format) cold too. Its
	// SONAMEs are kept in the same dir, so they go too.
	coldConfig, coldCacheDir string
	// bootConfig and bootCacheDir are the boot variant's: its probe cache
	// is emptied before each start, its SONAMEs are kept elsewhere.
	bootConfig, bootCacheDir string
	// compareConfig and compareCacheDir are --compare's: an older binary
	// may not know every key (sysfs_dir) and may keep another cache
	// format in a file of the same name, which each would then replace.
	compareConfig, compareCacheDir string
	control                        string // latencyfs's socket; "" on the plain host
}

func hostIn(work, name string) host {
	h := host{name: name, config: filepath.Join(work, "hook-"+name+".toml"), cacheDir: filepath.Join(work, "cache-"+name),
		coldConfig: filepath.Join(work, "hook-"+name+"-cold.toml"), coldCacheDir: filepath.Join(work, "cache-"+name+"-cold"),
		bootConfig: filepath.Join(work, "hook-"+name+"-boot.toml"), bootCacheDir: filepath.Join(work, "cache-"+name+"-boot"),
		compareConfig: filepath.Join(work, "hook-"+name+"-compare.toml"), compareCacheDir: filepath.Join(work, "cache-"+name+"-compare")}
	switch name {
	case "latency":
		h.libDir, h.driversDir = filepath.Join(work, "lat", "lib"), filepath.Join(work, "lat", "drivers")
		h.control = filepath.Join(work, "lat.sock")
	default:
		h.libDir, h.driversDir = filepath.Join(work, "host", fixture.LibDir), filepath.Join(work, "host", fixture.DriversDir)
	}
	return h
}

// prepareAndRun builds the simulated host and the image's lower layer, then
// for each host counts one start of each variant and times them all, each
// in a re-run of this program under dxgsim.
func prepareAndRun(o options) error {
	if os.Geteuid() != 0 {
		return errors.New("runs containers with runc: run it as root (sudo make bench-start)")
	}
	if o.hook == "" || o.dxgsim == "" {
		return errors.New("--hook and --dxgsim are required (hack/bench-start.sh passes them)")
	}
	if o.runs < 1 {
		return errors.New("--runs must be at least 1")
	}
	hosts := strings.Split(o.hosts, ",")
	for _, h := range hosts {
		if h != "plain" && h != "latency" {
			return fmt.Errorf("--hosts: unknown host %q (plain, latency)", h)
		}
		if h == "latency" && o.latencyfs == "" {
			return errors.New("the latency host needs --latencyfs (hack/bench-start.sh passes it)")
		}
	}
	for _, tool := range []string{"runc", "tar", "ldconfig"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s is not installed: install it (hack/setup.sh does)", tool)
		}
	}
	image := filepath.Join(o.cache, debianTarball)
	if _, err := os.Stat(image); err != nil {
		return fmt.Errorf("no Debian image at %s: run `go test ./test/e2e/` once as root, which builds it: %w", image, err)
	}
	work, err := os.MkdirTemp(o.workDir, "wsl-gpu-bench-start-")
	if err != nil {
		return err
	}
	if o.keep {
		fmt.Fprintf(os.Stderr, "bench-start: work dir %s\n", work)
	} else {
		defer os.RemoveAll(work)
	}
	if err := copyFile(o.hook, filepath.Join(work, "wsl-gpu-hook")); err != nil {
		return err
	}
	if err := copyFile(o.hook, filepath.Join(work, wsl.WrapperName)); err != nil {
		return err
	}
	if o.compare != "" {
		if err := copyFile(o.compare, filepath.Join(work, "wsl-gpu-hook-compare")); err != nil {
			return err
		}
	}
	if o.empty != "" {
		if err := copyFile(o.empty, filepath.Join(work, "emptyhook")); err != nil {
			return err
		}
		if err := copyFile("/bin/true", filepath.Join(work, "true")); err != nil {
			return err
		}
	}
	if o.dxgcall != "" {
		if err := copyFile(o.dxgcall, filepath.Join(work, "dxgcall")); err != nil {
			return err
		}
	}
	if o.floor != "" {
		if err := copyFile(o.floor, filepath.Join(work, "floorhook")); err != nil {
			return err
		}
	}
	p, err := simhost.Lookup(profileName)
	if err != nil {
		return err
	}
	if err := fixture.Build(filepath.Join(work, "host"), p, fixture.Options{CacheDir: filepath.Join(o.cache, "fixture")}); err != nil {
		return fmt.Errorf("build the fixture: %w", err)
	}
	if err := fixture.SysfsDevices(filepath.Join(work, "sys"), p, nil, nil); err != nil {
		return fmt.Errorf("build the simulated sysfs: %w", err)
	}
	lower := filepath.Join(work, "lower")
	if err := os.MkdirAll(lower, 0o755); err != nil {
		return err
	}
	if out, err := exec.Command("tar", "-C", lower, "-xf", image).CombinedOutput(); err != nil {
		return fmt.Errorf("extract %s: %w: %s", image, err, out)
	}
	for _, d := range []string{"dev", "runs", "state"} {
		if err := os.MkdirAll(filepath.Join(work, d), 0o755); err != nil {
			return err
		}
	}
	tmpl, err := exec.Command("runc", "spec", "--bundle", work).CombinedOutput()
	if err != nil {
		return fmt.Errorf("runc spec: %w: %s", err, tmpl)
	}
	defer removeCgroupParents()
	loadAvg, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("load average before: %s", loadAvg)
	for _, name := range hosts {
		h := hostIn(work, name)
		if err := runHost(o, work, h); err != nil {
			return fmt.Errorf("%s host: %w", name, err)
		}
	}
	loadAvg, _ = os.ReadFile("/proc/loadavg")
	fmt.Printf("load average after: %s", loadAvg)
	return nil
}

// runHost sets up one host, counts one start of each variant, then times
// them.
func runHost(o options, work string, h host) error {
	// The hook reads the simulated guest's sysfs (fixture.SysfsDevices),
	// as it reads /sys on WSL.
	sysfs := fmt.Sprintf("sysfs_dir = %q\n", filepath.Join(work, "sys"))
	// The hook never makes a SONAME dir (the .deb does).
	for _, d := range []string{h.cacheDir + "-sonames", h.coldCacheDir, h.bootCacheDir + "-sonames", h.compareCacheDir + "-sonames"} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	sonames := func(dir string) string { return fmt.Sprintf("soname_cache = %q\n", dir) }
	writeConfig := func(path, cache, extra string) error {
		cfg := fmt.Sprintf("dxg_device = %q\nlib_dir = %q\ndrivers_dir = %q\nlog_file = %q\nprobe_cache = %q\n%s",
			filepath.Join(work, "dev/dxg"), h.libDir, h.driversDir, filepath.Join(work, "hook.log"), cache, extra)
		return os.WriteFile(path, []byte(cfg), 0o644)
	}
	for _, c := range []struct{ path, cache, extra string }{
		{h.config, h.cacheDir, sysfs + sonames(h.cacheDir+"-sonames")},
		{h.coldConfig, h.coldCacheDir, sysfs + sonames(h.coldCacheDir)},
		{h.bootConfig, h.bootCacheDir, sysfs + sonames(h.bootCacheDir+"-sonames")},
	} {
		if err := writeConfig(c.path, c.cache, c.extra); err != nil {
			return err
		}
	}
	if o.compare != "" {
		// --compare's binary gets the hook's keys, or as many of them as
		// it knows: without sysfs_dir a warm start opens /dev/dxg and
		// lists the adapters, a cost the hook does not pay, which would
		// make the comparison say nothing about the change measured.
		for _, extra := range []string{sysfs + sonames(h.compareCacheDir+"-sonames"), sysfs, ""} {
			if err := writeConfig(h.compareConfig, h.compareCacheDir, extra); err != nil {
				return err
			}
			if knowsKeys(o.compare, h.compareConfig) {
				if extra != sysfs+sonames(h.compareCacheDir+"-sonames") {
					fmt.Printf("compare: the binary does not know every key of the hook's configuration: it runs with %q only\n", strings.TrimSpace(extra))
				}
				break
			}
		}
	}
	dxgArgs := []string{"--profile", profileName, "--dev", filepath.Join(work, "dev/dxg")}
	if h.name == "latency" {
		stop, err := startLatencyFS(o, work, h)
		if err != nil {
			return err
		}
		defer stop()
		dxgArgs = append(dxgArgs, "--host-latency", o.dxgLatency.String())
		fmt.Printf("\nlatency host: lib dir and drivers dir over FUSE (test/latencyfs), %v per request; dxg calls to the host %v each\n", o.fsLatency, o.dxgLatency)
	} else {
		fmt.Printf("\nplain host: fixture tree on disk, dxgsim answering at once\n")
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	childArgs := []string{"--host", h.name, "--runs", strconv.Itoa(o.runs)}
	if o.compare != "" {
		childArgs = append(childArgs, "--compare", o.compare)
	}
	if o.empty != "" {
		childArgs = append(childArgs, "--empty", o.empty)
	}
	underSim := func(extra []string, args ...string) error {
		a := append(append(slices.Clone(dxgArgs), extra...), "--", self)
		cmd := exec.Command(o.dxgsim, append(a, args...)...)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		cmd.Env = append(os.Environ(), envWork+"="+work)
		return cmd.Run()
	}
	if o.trace != "" {
		return underSim(nil, append(childArgs, "--trace", o.trace, "--wrap", o.wrap, "--trace-runs", strconv.Itoa(o.traceRuns))...)
	}
	if o.aloneOnly {
		return underSim(nil, append(childArgs, "--alone-only")...)
	}
	// One counted start of each variant, after an uncounted one that
	// leaves the cache a warm start finds.
	counts := map[string]roundTrips{}
	for _, v := range variantNames {
		if !hasVariant(v, o.compare != "", o.empty != "") {
			continue
		}
		if err := underSim(nil, append(slices.Clone(childArgs), "--count", v)...); err != nil {
			return fmt.Errorf("warm up %s under dxgsim: %w", v, err)
		}
		rep := filepath.Join(work, "count-"+h.name+"-"+v+".json")
		if err := underSim([]string{"--report", rep}, append(slices.Clone(childArgs), "--count", v)...); err != nil {
			return fmt.Errorf("count %s under dxgsim: %w", v, err)
		}
		rt, err := readCounts(work, h.name, v, rep)
		if err != nil {
			return err
		}
		counts[v] = rt
	}
	if err := underSim(nil, childArgs...); err != nil {
		return fmt.Errorf("under dxgsim: %w", err)
	}
	var times map[string][]time.Duration
	data, err := os.ReadFile(filepath.Join(work, "times-"+h.name+".json"))
	if err == nil {
		err = json.Unmarshal(data, &times)
	}
	if err != nil {
		return fmt.Errorf("the timing run's results: %w", err)
	}
	report(h, times, counts, o.runs)
	return nil
}

// startLatencyFS mounts the fixture's lib dir and drivers dir through
// latencyfs and returns how to stop it.
func startLatencyFS(o options, work string, h host) (func(), error) {
	for _, d := range []string{h.libDir, h.driversDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	plain := hostIn(work, "plain")
	cmd := exec.Command(o.latencyfs, "--latency", o.fsLatency.String(), "--control", h.control,
		plain.libDir+":"+h.libDir, plain.driversDir+":"+h.driversDir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start latencyfs: %w", err)
	}
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		for _, d := range []string{h.libDir, h.driversDir} {
			_ = unix.Unmount(d, unix.MNT_DETACH) // if it died without unmounting
		}
	}
	line := make([]byte, 6)
	if _, err := io.ReadFull(out, line); err != nil || string(line) != "ready\n" {
		stop()
		return nil, fmt.Errorf("latencyfs did not start: %q, %v", line, err)
	}
	return stop, nil
}

// roundTrips is what one start sent towards the Windows host.
type roundTrips struct {
	Ioctls, HostIoctls uint64            // dxg ioctls, those forwarded to the host
	FS                 uint64            // file system requests waited on (latency host)
	FSByOp             map[string]uint64 // by FUSE opcode
	HasFS              bool
}

func readCounts(work, hostName, v, report string) (roundTrips, error) {
	var rt roundTrips
	var rep struct {
		Calls map[string]uint64 `json:"calls"`
		// The driver's process object: made on the host at a process's
		// first open of /dev/dxg, destroyed at its last close.
		ProcessesCreated   uint64 `json:"processesCreated"`
		ProcessesDestroyed uint64 `json:"processesDestroyed"`
	}
	data, err := os.ReadFile(report)
	if err == nil {
		err = json.Unmarshal(data, &rep)
	}
	if err != nil {
		return rt, fmt.Errorf("dxgsim's report for %s: %w", v, err)
	}
	for name, n := range rep.Calls {
		rt.Ioctls += n
		if name == "QUERYADAPTERINFO" {
			rt.HostIoctls += n
		}
	}
	rt.HostIoctls += rep.ProcessesCreated + rep.ProcessesDestroyed
	data, err = os.ReadFile(filepath.Join(work, "fs-"+hostName+"-"+v+".json"))
	if errors.Is(err, fs.ErrNotExist) {
		return rt, nil
	}
	if err == nil {
		err = json.Unmarshal(data, &rt.FSByOp)
	}
	if err != nil {
		return rt, fmt.Errorf("file system counts for %s: %w", v, err)
	}
	rt.HasFS, rt.FS = true, rt.FSByOp["total"]
	return rt, nil
}

// takeFSCounts reads latencyfs's counts since the last read.
func takeFSCounts(control string) (map[string]uint64, error) {
	conn, err := net.Dial("unix", control)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	var c map[string]uint64
	err = json.NewDecoder(conn).Decode(&c)
	return c, err
}

// variant is one way of starting the container.
type variant struct {
	name   string
	edit   func(spec *specs.Spec, rootfs string)
	before func() error // run before the start, untimed
	// runtime runs the container instead of runc, with env added.
	runtime string
	env     []string
}

// variantNames orders the report: plain first, the floors last.
var variantNames = []string{"plain", "cold", "boot", "hook", "cdihook", "wrapper", "nvcdi", "compare", "true", "emptygo"}

func hasVariant(name string, compare, floors bool) bool {
	switch name {
	case "compare":
		return compare
	case "true", "emptygo":
		return floors
	}
	return true
}

// child is a re-run under dxgsim: it counts one start or times them all.
func child(work string, o options) error {
	h := hostIn(work, o.host)
	var base specs.Spec
	data, err := os.ReadFile(filepath.Join(work, "config.json"))
	if err == nil {
		err = json.Unmarshal(data, &base)
	}
	if err != nil {
		return fmt.Errorf("runc spec template: %w", err)
	}
	base.Process.Terminal = false
	base.Process.Args = []string{"/bin/true"}
	base.Root = &specs.Root{Path: "rootfs"}
	base.Hostname = "bench"

	variants, err := makeVariants(work, h, o.compare != "", o.empty != "")
	if err != nil {
		return err
	}
	if o.trace != "" {
		return traceAlone(work, h, &base, variants, o.trace, strings.Fields(o.wrap), o.traceRuns)
	}
	if o.count != "" {
		i := slices.IndexFunc(variants, func(v variant) bool { return v.name == o.count })
		if i < 0 {
			return fmt.Errorf("no variant %q", o.count)
		}
		return countOnce(work, h, &base, variants[i])
	}
	if o.aloneOnly {
		return hookOnly(work, h, &base, variants, o.runs)
	}
	if err := measure(work, h, &base, variants, o.runs); err != nil {
		return err
	}
	return hookOnly(work, h, &base, variants, o.runs)
}

// hookOnly times the hook process alone, the way runc runs a prestart hook
// (the state on stdin), against one created container, next to the empty
// Go hook run the same way: a whole start's noise (runc, the overlay, the
// cgroup) stays out. Each run gets what a first start has: a fresh overlay
// root and a fresh mount namespace (nothing of an earlier run mounted, made
// or written in it); only the probe cache carries over, as between starts.
// Besides the wall time it reports each variant's CPU time (user + system,
// all threads) and page faults from the kernel's accounting of the
// process: on a shared machine those move much less than wall time.
func hookOnly(work string, h host, base *specs.Spec, variants []variant, runs int) error {
	if _, err := os.Stat(filepath.Join(work, "emptyhook")); err != nil {
		return nil // no floor to compare with
	}
	a, err := newAlone(work, h, base, variants)
	if err != nil {
		return err
	}
	defer a.close()
	type sample struct{ wall, cpu, faults []time.Duration }
	got := map[string]*sample{}
	for i := -1; i < runs; i++ { // round -1 warms up
		for k := range a.hooks {
			v := a.hooks[(max(i, 0)+k)%len(a.hooks)]
			r, err := a.run(v, nil)
			if err != nil {
				return err
			}
			if i < 0 {
				continue
			}
			if got[v.name] == nil {
				got[v.name] = &sample{}
			}
			s := got[v.name]
			s.wall = append(s.wall, r.wall)
			s.cpu = append(s.cpu, r.cpu)
			// Counts ride in a Duration slice to share median.
			s.faults = append(s.faults, time.Duration(r.faults))
		}
	}
	floor := got["emptygo"]
	fmt.Printf("the hook process alone (%s host), exec'd with a created container's state, each run on a fresh root and mount namespace, %d runs each, alternating:\n", h.name, runs)
	for _, v := range a.hooks {
		t := got[v.name]
		line := fmt.Sprintf("  %-7s median %5s ms, p25 %5s, p75 %5s, min %5s", v.name, ms(median(t.wall)), ms(quantile(t.wall, 0.25)), ms(quantile(t.wall, 0.75)), ms(slices.Min(t.wall)))
		if v.name != "emptygo" {
			line += fmt.Sprintf("; over the empty Go hook %s ms (medians), paired %s ms", ms(median(t.wall)-median(floor.wall)), ms(median(paired(t.wall, floor.wall))))
		}
		fmt.Println(line)
	}
	if b, ok := got["binary"]; ok {
		fmt.Printf("  of what hook adds: %s ms its binary doing nothing (size, package initialisation: binary over emptygo, paired), %s ms the start's work (hook over binary, paired)\n",
			ms(median(paired(b.wall, floor.wall))), ms(median(paired(got["hook"].wall, b.wall))))
	}
	if f, ok := got["floor"]; ok {
		fmt.Printf("  the floor of a warm start (the same stats, cgroup rule, namespace entry, node, binds and files, every decision made beforehand: floor over emptygo, paired) is %s ms; the hook's own work over it (hook over floor, paired) %s ms\n",
			ms(median(paired(f.wall, floor.wall))), ms(median(paired(got["hook"].wall, f.wall))))
	}
	if d, ok := got["dxgcall"]; ok {
		fmt.Printf("  of the start's work: %s ms its one dxg call (open, ENUMADAPTERS3, close: dxgcall over emptygo, paired), answered here by dxgsim through seccomp; on WSL the guest kernel answers it, and the open and the last close each wait on the host\n",
			ms(median(paired(d.wall, floor.wall))))
	}
	fmt.Println("  CPU time (user+system, all threads) and page faults, medians:")
	for _, v := range a.hooks {
		t := got[v.name]
		line := fmt.Sprintf("  %-7s cpu %5s ms, page faults %4d", v.name, ms(median(t.cpu)), int64(median(t.faults)))
		if v.name != "emptygo" {
			line += fmt.Sprintf("; over the empty Go hook: cpu %s ms, %d faults", ms(median(t.cpu)-median(floor.cpu)), int64(median(t.faults)-median(floor.faults)))
		}
		fmt.Println(line)
	}
	if h.name == "latency" {
		if cost, err := fsRequestCost(h.libDir); err == nil {
			fmt.Printf("  a file system request to the latency host costs %.0f µs here (a stat of the lib dir's root, one GETATTR through latencyfs; the modelled delay is part of it): a warm start makes 4\n", float64(cost.Nanoseconds())/1000)
		}
	}
	if cost, err := faultCost(); err == nil {
		line := fmt.Sprintf("  a page fault costs %.1f µs here (first touch of an anonymous page, median of 7 × 256)", float64(cost.Nanoseconds())/1000)
		if t, ok := got["hook"]; ok {
			extra := int64(median(t.faults) - median(floor.faults))
			line += fmt.Sprintf(": the hook's %d faults over the empty Go hook's are about %s ms of its time", extra, ms(time.Duration(extra)*cost))
		}
		fmt.Println(line)
	}
	return nil
}

// fsRequestCost is what one request to the latency host's file system
// costs on this machine, the delay it models included: the median of 51
// stats of dir, the root of a latencyfs mount (one GETATTR each). A FUSE
// server on the same two vCPUs as its callers charges more than the delay
// it sleeps; this says how much more.
func fsRequestCost(dir string) (time.Duration, error) {
	var per []time.Duration
	var st unix.Stat_t
	for range 51 {
		start := time.Now()
		if err := unix.Stat(dir, &st); err != nil {
			return 0, err
		}
		per = append(per, time.Since(start))
	}
	return median(per), nil
}

// faultCost is what one page fault costs on this machine: the time to touch
// fresh anonymous pages, per page. On a nested VM it is many times a bare
// machine's, and a Go process takes hundreds at start, so the figure says
// how much of the times above are faults.
func faultCost() (time.Duration, error) {
	const pages = 256
	var per []time.Duration
	for range 7 {
		b, err := unix.Mmap(-1, 0, pages*4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
		if err != nil {
			return 0, err
		}
		start := time.Now()
		for i := 0; i < pages; i++ {
			b[i*4096] = 1
		}
		per = append(per, time.Since(start)/pages)
		unix.Munmap(b)
	}
	return median(per), nil
}

// traceAlone runs one hook-alone variant (emptygo, hook, boot, cold, binary, compare or floor)
// runs times under wrap (strace, perf stat, ...), after one untimed run of
// it that warms the probe and page caches, and prints how long the wrapped
// runs took. It is how one finds where a start's time goes.
func traceAlone(work string, h host, base *specs.Spec, variants []variant, name string, wrap []string, runs int) error {
	a, err := newAlone(work, h, base, variants)
	if err != nil {
		return err
	}
	defer a.close()
	i := slices.IndexFunc(a.hooks, func(v aloneHook) bool { return v.name == name })
	if i < 0 {
		return fmt.Errorf("--trace: no hook-alone variant %q (emptygo, hook, boot, cold, binary, compare, floor)", name)
	}
	if _, err := a.run(a.hooks[i], nil); err != nil {
		return err
	}
	var wall, cpu []time.Duration
	for range max(runs, 1) {
		r, err := a.run(a.hooks[i], wrap)
		if err != nil {
			return err
		}
		wall, cpu = append(wall, r.wall), append(cpu, r.cpu)
	}
	fmt.Printf("%s (%s host) under %q, %d runs: median %s ms, cpu %s ms\n", name, h.name, strings.Join(wrap, " "), len(wall), ms(median(wall)), ms(median(cpu)))
	return nil
}

// aloneHook is one hook run alone against the created container.
type aloneHook struct {
	name   string
	args   []string
	before func() error
	// after, if set, checks what a run did, before the next run's fresh
	// root replaces it.
	after func() error
}

// alone is the created container the hooks run alone against: the
// container (for its cgroups), an overlay root at the bundle's rootfs
// made fresh for every run, and the stand-in the hook takes for the
// container's process.
type alone struct {
	id, dir, rootfs string
	hooks           []aloneHook
	standIn         *exec.Cmd
	cleanups        []func()
	lower           string
	n               int
}

// aloneRun is what one run cost.
type aloneRun struct {
	wall, cpu time.Duration
	faults    int64
}

func newAlone(work string, h host, base *specs.Spec, variants []variant) (a *alone, err error) {
	a = &alone{id: "bench-hookonly", lower: filepath.Join(work, "lower")}
	defer func() {
		if err != nil {
			a.close()
		}
	}()
	var hook, cold, boot variant
	for _, v := range variants {
		switch v.name {
		case "hook":
			hook = v
		case "cold":
			cold = v
		case "boot":
			boot = v
		}
	}
	a.dir = filepath.Join(work, "runs", a.id)
	bundle := filepath.Join(a.dir, "bundle")
	a.rootfs = filepath.Join(bundle, "rootfs")
	if err := os.MkdirAll(a.rootfs, 0o755); err != nil {
		return nil, err
	}
	a.cleanups = append(a.cleanups, func() { os.RemoveAll(a.dir) })
	if err := a.freshRoot(); err != nil {
		return nil, err
	}
	a.cleanups = append(a.cleanups, func() { unix.Unmount(a.rootfs, unix.MNT_DETACH) })
	spec := clone(base)
	spec.Linux.CgroupsPath = "/" + cgroupParent + "/" + a.id
	if spec.Linux.Resources == nil {
		spec.Linux.Resources = &specs.LinuxResources{}
	}
	spec.Process.Env = append(spec.Process.Env, "WSL_GPU_DEVICES=all")
	data, err := json.Marshal(spec)
	if err == nil {
		err = os.WriteFile(filepath.Join(bundle, "config.json"), data, 0o644)
	}
	if err != nil {
		return nil, err
	}
	state := filepath.Join(work, "state")
	// The container's process keeps runc's stdio: give it none, or a
	// reader of its output would wait for it to exit.
	create := exec.Command("runc", "--root", state, "--log", filepath.Join(a.dir, "runc.log"), "create", "--bundle", bundle, a.id)
	if err := create.Run(); err != nil {
		log, _ := os.ReadFile(filepath.Join(a.dir, "runc.log"))
		return nil, fmt.Errorf("runc create: %w: %s", err, log)
	}
	a.cleanups = append(a.cleanups, func() { exec.Command("runc", "--root", state, "delete", "-f", a.id).Run() })
	a.cleanups = append(a.cleanups, a.stopStandIn)
	a.hooks = []aloneHook{
		{name: "emptygo", args: []string{filepath.Join(work, "emptyhook")}},
		{name: "hook", args: []string{filepath.Join(work, "wsl-gpu-hook"), "--config", h.config, "prestart"}, before: hook.before},
		{name: "cold", args: []string{filepath.Join(work, "wsl-gpu-hook"), "--config", h.coldConfig, "prestart"}, before: cold.before},
		{name: "boot", args: []string{filepath.Join(work, "wsl-gpu-hook"), "--config", h.bootConfig, "prestart"}, before: boot.before},
		// The hook's binary doing nothing: its size and its packages'
		// initialisation, apart from the work of a start.
		{name: "binary", args: []string{filepath.Join(work, "wsl-gpu-hook"), "version"}},
	}
	if _, err := os.Stat(filepath.Join(work, "dxgcall")); err == nil {
		// The one dxg call of a warm start, alone: what the simulator
		// (and, on the latency host, the process object) charges for it.
		a.hooks = append(a.hooks, aloneHook{name: "dxgcall", args: []string{filepath.Join(work, "dxgcall"), filepath.Join(work, "dev/dxg")}})
	}
	if _, err := os.Stat(filepath.Join(work, "wsl-gpu-hook-compare")); err == nil {
		a.hooks = append(a.hooks, aloneHook{name: "compare", args: []string{filepath.Join(work, "wsl-gpu-hook-compare"), "--config", h.compareConfig, "prestart"}, before: hook.before})
	}
	if _, err := os.Stat(filepath.Join(work, "floorhook")); err == nil {
		floor, err := a.floorHook(work, h)
		if err != nil {
			return nil, fmt.Errorf("the floor: %w", err)
		}
		a.hooks = append(a.hooks, floor)
	}
	return a, nil
}

// floorHook is the floor variant: floorhook making the changes the hook's
// warm start makes, with the folders it bound and the loader cache it
// wrote, taken from one run of the hook. The floor's first run is checked
// to have made them all, so that what it measures is that work.
func (a *alone) floorHook(work string, h host) (aloneHook, error) {
	from := filepath.Join(a.dir, "floor")
	if err := os.MkdirAll(from, 0o755); err != nil {
		return aloneHook{}, err
	}
	i := slices.IndexFunc(a.hooks, func(v aloneHook) bool { return v.name == "hook" })
	if _, err := a.run(a.hooks[i], nil); err != nil {
		return aloneHook{}, err
	}
	ents, err := os.ReadDir(filepath.Join(a.rootfs, "usr/lib/wsl/drivers"))
	if err != nil {
		return aloneHook{}, err
	}
	var folders []string
	for _, e := range ents {
		folders = append(folders, e.Name())
	}
	cache, err := os.ReadFile(filepath.Join(a.rootfs, "etc/ld.so.cache"))
	if err != nil {
		return aloneHook{}, err
	}
	if err := os.WriteFile(filepath.Join(from, "folders"), []byte(strings.Join(folders, "\n")), 0o644); err != nil {
		return aloneHook{}, err
	}
	if err := os.WriteFile(filepath.Join(from, "ld.so.cache"), cache, 0o644); err != nil {
		return aloneHook{}, err
	}
	args := []string{filepath.Join(work, "floorhook"), "-lib", h.libDir, "-drivers", h.driversDir, "-dev", filepath.Join(work, "dev/dxg"), "-from", from}
	allow := filepath.Join("/sys/fs/cgroup/devices", cgroupParent, a.id, "devices.allow")
	if _, err := os.Stat(allow); err == nil {
		args = append(args, "-devices-allow", allow)
	}
	checked := false
	check := func() error {
		if checked {
			return nil
		}
		checked = true
		return a.checkFloor(folders, cache)
	}
	return aloneHook{name: "floor", args: args, after: check}, nil
}

// checkFloor checks that the floor's run made what the hook makes: the
// node, the three read-only mounts in the stand-in's namespace, the loader
// files and the link.
func (a *alone) checkFloor(folders []string, cache []byte) error {
	var st unix.Stat_t
	if err := unix.Lstat(filepath.Join(a.rootfs, "dev/dxg"), &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFCHR {
		return fmt.Errorf("no /dev/dxg node in the rootfs (%v)", err)
	}
	mi, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", a.standIn.Process.Pid))
	if err != nil {
		return err
	}
	want := []string{"usr/lib/wsl/lib"}
	for _, f := range folders {
		want = append(want, "usr/lib/wsl/drivers/"+f)
	}
	for _, w := range want {
		found := false
		for _, l := range strings.Split(string(mi), "\n") {
			if f := strings.Fields(l); len(f) > 5 && f[4] == filepath.Join(a.rootfs, w) && strings.HasPrefix(f[5], "ro,") {
				found = true
			}
		}
		if !found {
			return fmt.Errorf("%s is not mounted read-only in the container's namespace", w)
		}
	}
	if got, err := os.ReadFile(filepath.Join(a.rootfs, "etc/ld.so.cache")); err != nil || !bytes.Equal(got, cache) {
		return fmt.Errorf("the loader cache is not the hook's (%v)", err)
	}
	if _, err := os.ReadFile(filepath.Join(a.rootfs, "etc/ld.so.conf.d/wsl-gpu-hook.conf")); err != nil {
		return err
	}
	if _, err := os.Readlink(filepath.Join(a.rootfs, "usr/bin/nvidia-smi")); err != nil {
		return err
	}
	return nil
}

func (a *alone) close() {
	for i := len(a.cleanups) - 1; i >= 0; i-- {
		a.cleanups[i]()
	}
}

// freshRoot mounts a new, empty overlay upper over the image at the
// rootfs, in place of the last run's.
func (a *alone) freshRoot() error {
	unix.Unmount(a.rootfs, unix.MNT_DETACH) // the last run's, if any
	a.n++
	layer := filepath.Join(a.dir, "layers", strconv.Itoa(a.n))
	os.RemoveAll(filepath.Join(a.dir, "layers"))
	upper, wdir := filepath.Join(layer, "upper"), filepath.Join(layer, "work")
	for _, d := range []string{upper, wdir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", a.lower, upper, wdir)
	if err := unix.Mount("overlay", a.rootfs, "overlay", 0, opts); err != nil {
		return fmt.Errorf("mount overlay: %w", err)
	}
	return nil
}

func (a *alone) stopStandIn() {
	if a.standIn != nil {
		_ = a.standIn.Process.Kill()
		_ = a.standIn.Wait()
		a.standIn = nil
	}
}

// fresh gives the next run what a first start has and returns the state
// to give the hook. Hooks run before pivot_root, in a mount namespace that
// still shows the bundle; a created container is past that. The hook is
// pointed at a stand-in instead: a process in a private copy of this mount
// namespace, moved into the container's cgroups. Both the root and the
// stand-in are new for each run, so no run finds an earlier one's mounts.
func (a *alone) fresh() (string, error) {
	a.stopStandIn()
	if err := a.freshRoot(); err != nil {
		return "", err
	}
	var ours unix.Stat_t
	if err := unix.Stat("/proc/self/ns/mnt", &ours); err != nil {
		return "", err
	}
	a.standIn = exec.Command("unshare", "--mount", "--propagation", "private", "sleep", "3600")
	if err := a.standIn.Start(); err != nil {
		return "", fmt.Errorf("start the stand-in: %w", err)
	}
	pid := a.standIn.Process.Pid
	// Wait until unshare has exec'd sleep in its own mount namespace.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		var ns unix.Stat_t
		exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		if unix.Stat(fmt.Sprintf("/proc/%d/ns/mnt", pid), &ns) == nil && ns.Ino != ours.Ino && filepath.Base(exe) == "sleep" {
			break
		}
		if time.Now().After(deadline) {
			return "", errors.New("the stand-in did not start")
		}
	}
	procs, _ := filepath.Glob("/sys/fs/cgroup/*/" + cgroupParent + "/" + a.id + "/cgroup.procs")
	procs = append(procs, filepath.Join("/sys/fs/cgroup", cgroupParent, a.id, "cgroup.procs"))
	moved := 0
	for _, p := range procs {
		if os.WriteFile(p, []byte(strconv.Itoa(pid)), 0) == nil {
			moved++
		}
	}
	if moved == 0 {
		return "", errors.New("could not move the stand-in into the container's cgroups")
	}
	return fmt.Sprintf(`{"ociVersion":"1.0.2","id":%q,"status":"created","pid":%d,"bundle":%q}`, a.id, pid, filepath.Dir(a.rootfs)), nil
}

// run runs the hook once on a fresh root, under wrap if any, and returns
// what it cost.
func (a *alone) run(v aloneHook, wrap []string) (aloneRun, error) {
	stdin, err := a.fresh()
	if err != nil {
		return aloneRun{}, err
	}
	if v.before != nil {
		if err := v.before(); err != nil {
			return aloneRun{}, err
		}
	}
	args := append(slices.Clone(wrap), v.args...)
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin = strings.NewReader(stdin)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	d := time.Since(start)
	if err != nil {
		return aloneRun{}, fmt.Errorf("%s on a created container: %w: %s", v.name, err, out)
	}
	if v.after != nil {
		if err := v.after(); err != nil {
			return aloneRun{}, fmt.Errorf("%s on a created container: %w", v.name, err)
		}
	}
	if len(wrap) > 0 {
		os.Stdout.Write(out)
	}
	r := aloneRun{wall: d}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.cpu = time.Duration(syscall.TimevalToNsec(ru.Utime) + syscall.TimevalToNsec(ru.Stime))
		r.faults = ru.Minflt + ru.Majflt
	}
	return r, nil
}

func makeVariants(work string, h host, compare, floors bool) ([]variant, error) {
	var node unix.Stat_t
	if err := unix.Stat(filepath.Join(work, "dev/dxg"), &node); err != nil {
		return nil, fmt.Errorf("the simulated node: %w", err)
	}
	nv, err := nvidiaEdits(h, node)
	if err != nil {
		return nil, err
	}
	withHookConfig := func(bin, cfg string) func(*specs.Spec, string) {
		return func(s *specs.Spec, _ string) {
			s.Process.Env = append(s.Process.Env, "WSL_GPU_DEVICES=all")
			s.Hooks = &specs.Hooks{Prestart: []specs.Hook{{ //nolint:staticcheck // Docker still uses prestart.
				Path: filepath.Join(work, bin),
				Args: []string{"wsl-gpu-hook", "--config", cfg, "prestart"},
			}}}
		}
	}
	withHook := func(bin string) func(*specs.Spec, string) { return withHookConfig(bin, h.config) }
	emptyDir := func(dir string) func() error {
		return func() error {
			ents, err := os.ReadDir(dir)
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			for _, e := range ents {
				if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
					return err
				}
			}
			return err
		}
	}
	var vs []variant
	for _, name := range variantNames {
		if !hasVariant(name, compare, floors) {
			continue
		}
		v := variant{name: name}
		switch name {
		case "plain":
			v.edit = func(*specs.Spec, string) {}
		case "hook":
			v.edit = withHook("wsl-gpu-hook")
		case "cold":
			v.edit, v.before = withHookConfig("wsl-gpu-hook", h.coldConfig), emptyDir(h.coldCacheDir)
		case "boot":
			v.edit, v.before = withHookConfig("wsl-gpu-hook", h.bootConfig), emptyDir(h.bootCacheDir)
		case "cdihook":
			v.edit = cdiEdits(work, h, node)
		case "wrapper":
			v.edit = func(s *specs.Spec, _ string) { s.Process.Env = append(s.Process.Env, "WSL_GPU_DEVICES=all") }
			v.runtime, v.env = filepath.Join(work, wsl.WrapperName), []string{config.Env + "=" + h.config}
		case "nvcdi":
			v.edit = nv
		case "compare":
			v.edit = withHookConfig("wsl-gpu-hook-compare", h.compareConfig)
		case "true":
			v.edit = withHook("true")
		case "emptygo":
			v.edit = withHook("emptyhook")
		}
		vs = append(vs, v)
	}
	return vs, nil
}

// countOnce starts v once with the file system counts taken around it;
// dxgsim, run for this start alone, counts the ioctls.
func countOnce(work string, h host, base *specs.Spec, v variant) error {
	// The kernel sends RELEASE and RELEASEDIR without waiting for them:
	// let the last start's arrive before the count starts, and this one's
	// before it ends.
	const settle = 200 * time.Millisecond
	if h.control != "" {
		time.Sleep(settle)
		if _, err := takeFSCounts(h.control); err != nil {
			return fmt.Errorf("latencyfs: %w", err)
		}
	}
	if _, err := runOnce(work, base, v, 0); err != nil {
		return fmt.Errorf("%s: %w", v.name, err)
	}
	if h.control == "" {
		return nil
	}
	time.Sleep(settle)
	c, err := takeFSCounts(h.control)
	if err != nil {
		return fmt.Errorf("latencyfs: %w", err)
	}
	data, _ := json.Marshal(c)
	return os.WriteFile(filepath.Join(work, "fs-"+h.name+"-"+v.name+".json"), data, 0o644)
}

func measure(work string, h host, base *specs.Spec, variants []variant, runs int) error {
	// One untimed start warms the probe cache and the page cache.
	for _, v := range variants {
		if v.name == "hook" {
			if _, err := runOnce(work, base, v, 0); err != nil {
				return fmt.Errorf("warm-up: %w", err)
			}
		}
	}
	times := make(map[string][]time.Duration)
	for i := range runs {
		// Rotate the order so no variant always follows another.
		for k := range variants {
			v := variants[(i+k)%len(variants)]
			d, err := runOnce(work, base, v, i)
			if err != nil {
				return fmt.Errorf("run %d, %s: %w", i, v.name, err)
			}
			times[v.name] = append(times[v.name], d)
		}
	}
	data, err := json.Marshal(times)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(work, "times-"+h.name+".json"), data, 0o644)
}

// cdiEdits is what an engine does with our CDI spec's "all" device
// (pkg/setup/cdispec): the node with its rule, the lib dir bound read-only, the
// device's selection variable, and cdi-hook at createContainer.
func cdiEdits(work string, h host, node unix.Stat_t) func(*specs.Spec, string) {
	major, minor := int64(unix.Major(node.Rdev)), int64(unix.Minor(node.Rdev))
	mode := os.FileMode(0o666)
	sel := cdiselect.EnvName(cdispec.Kind, "all") + "=" + cdiselect.Selection{All: true, Index: -1}.String()
	return func(s *specs.Spec, _ string) {
		s.Process.Env = append(s.Process.Env, sel, "WSL_GPU_DEVICES=void")
		s.Mounts = append(s.Mounts, specs.Mount{Source: h.libDir, Destination: "/" + fixture.LibDir, Type: "bind",
			Options: []string{"ro", "nosuid", "nodev", "rbind", "rprivate"}})
		s.Linux.Devices = append(s.Linux.Devices, specs.LinuxDevice{Path: "/dev/dxg", Type: "c", Major: major, Minor: minor, FileMode: &mode})
		s.Linux.Resources.Devices = append(s.Linux.Resources.Devices, specs.LinuxDeviceCgroup{Allow: true, Type: "c", Major: &major, Minor: &minor, Access: "rwm"})
		s.Hooks = &specs.Hooks{CreateContainer: []specs.Hook{{
			Path: filepath.Join(work, "wsl-gpu-hook"),
			Args: []string{"wsl-gpu-hook", "--config", h.config, "cdi-hook"},
		}}}
	}
}

// nvidiaEdits is the container edit NVIDIA's WSL CDI spec makes, from the
// same fixture the hook reads, bound from the host's dirs.
func nvidiaEdits(h host, node unix.Stat_t) (func(*specs.Spec, string), error) {
	p, err := simhost.Lookup(profileName)
	if err != nil {
		return nil, err
	}
	var folders []string
	for _, a := range p.Adapters {
		if a.VendorID == simhost.VendorNVIDIA {
			win := a.DriverStorePath
			folders = append(folders, win[strings.LastIndexByte(win, '\\')+1:])
		}
	}
	if len(folders) != 1 {
		return nil, fmt.Errorf("want one NVIDIA adapter in profile %s, found %d", profileName, len(folders))
	}
	var mounts []specs.Mount
	bind := func(hostPath, ctrPath string) {
		mounts = append(mounts, specs.Mount{Source: hostPath, Destination: ctrPath, Type: "bind",
			Options: []string{"ro", "nosuid", "nodev", "rbind", "rprivate"}})
	}
	folderInCtr := "/" + fixture.DriversDir + "/" + folders[0]
	hostFolder := filepath.Join(h.driversDir, folders[0])
	err = filepath.WalkDir(hostFolder, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(hostFolder, p)
			bind(p, folderInCtr+"/"+rel)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	bind(filepath.Join(h.libDir, "libdxcore.so"), "/"+fixture.LibDir+"/libdxcore.so")
	major, minor := int64(unix.Major(node.Rdev)), int64(unix.Minor(node.Rdev))
	mode := os.FileMode(0o666)
	ldconfig, err := exec.LookPath("ldconfig")
	if err != nil {
		return nil, err
	}
	return func(s *specs.Spec, rootfs string) {
		s.Mounts = append(s.Mounts, mounts...)
		s.Linux.Devices = append(s.Linux.Devices, specs.LinuxDevice{Path: "/dev/dxg", Type: "c", Major: major, Minor: minor, FileMode: &mode})
		s.Linux.Resources.Devices = append(s.Linux.Resources.Devices, specs.LinuxDeviceCgroup{Allow: true, Type: "c", Major: &major, Minor: &minor, Access: "rwm"})
		// update-ldcache writes a drop-in naming the folders and runs
		// the host's ldconfig with -r on the container's root; the
		// createContainer hook runs in the container's mount namespace
		// before pivot_root, where the root is at its host path.
		script := fmt.Sprintf("printf '%%s\\n' %s /usr/lib/wsl/lib > %s/etc/ld.so.conf.d/00-nvcr-bench.conf && exec %s -r %s",
			folderInCtr, rootfs, ldconfig, rootfs)
		s.Hooks = &specs.Hooks{CreateContainer: []specs.Hook{{Path: "/bin/sh", Args: []string{"sh", "-c", script}}}}
	}, nil
}

// runOnce starts and removes one container of variant v on a fresh overlay
// and returns how long `runc run` took.
func runOnce(work string, base *specs.Spec, v variant, i int) (time.Duration, error) {
	id := fmt.Sprintf("bench-%s-%d", v.name, i)
	dir := filepath.Join(work, "runs", id)
	bundle := filepath.Join(dir, "bundle")
	rootfs := filepath.Join(bundle, "rootfs")
	upper, wdir := filepath.Join(dir, "upper"), filepath.Join(dir, "work")
	for _, d := range []string{rootfs, upper, wdir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return 0, err
		}
	}
	defer os.RemoveAll(dir)
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", filepath.Join(work, "lower"), upper, wdir)
	if err := unix.Mount("overlay", rootfs, "overlay", 0, opts); err != nil {
		return 0, fmt.Errorf("mount overlay: %w", err)
	}
	defer unix.Unmount(rootfs, unix.MNT_DETACH)
	if v.before != nil {
		if err := v.before(); err != nil {
			return 0, err
		}
	}

	spec := clone(base)
	spec.Linux.CgroupsPath = "/" + cgroupParent + "/" + id
	if spec.Linux.Resources == nil {
		spec.Linux.Resources = &specs.LinuxResources{}
	}
	v.edit(spec, rootfs)
	data, err := json.Marshal(spec)
	if err != nil {
		return 0, err
	}
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), data, 0o644); err != nil {
		return 0, err
	}
	// Settle the page cache and writeback of the setup before timing.
	syscall.Sync()
	runtime := "runc"
	if v.runtime != "" {
		runtime = v.runtime
	}
	cmd := exec.Command(runtime, "--root", filepath.Join(work, "state"), "run", "--bundle", bundle, id)
	cmd.Env = append(os.Environ(), v.env...)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	d := time.Since(start)
	if err != nil {
		exec.Command("runc", "--root", filepath.Join(work, "state"), "delete", "-f", id).Run()
		return 0, fmt.Errorf("runc run: %w: %s", err, out)
	}
	return d, nil
}

func clone(s *specs.Spec) *specs.Spec {
	data, _ := json.Marshal(s)
	var c specs.Spec
	_ = json.Unmarshal(data, &c)
	return &c
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// paired returns each round's a-b: the variants of a round run back to
// back, so a load that drifts between rounds weighs on both alike.
func paired(a, b []time.Duration) []time.Duration {
	d := make([]time.Duration, len(a))
	for i := range a {
		d[i] = a[i] - b[i]
	}
	return d
}

func quantile(ds []time.Duration, q float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[int(q*float64(len(s)-1)+0.5)]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d)/float64(time.Millisecond)) }

func report(h host, times map[string][]time.Duration, counts map[string]roundTrips, runs int) {
	fmt.Printf("runc run of /bin/true on an overlay root on disk, simulated %s host (%s), %d runs each, alternating\n", profileName, h.name, runs)
	fmt.Printf("%-7s %8s %8s %8s %8s | %9s %9s | %6s %5s %6s\n", "variant", "median", "p25", "p75", "min", "adds", "paired", "ioctls", "host", "fs")
	plain := times["plain"]
	for _, name := range variantNames {
		t := times[name]
		if len(t) == 0 {
			continue
		}
		adds, pair := "", ""
		if name != "plain" {
			adds, pair = ms(median(t)-median(plain))+" ms", ms(median(paired(t, plain)))+" ms"
		}
		rt := counts[name]
		fsCount := "-"
		if rt.HasFS {
			fsCount = strconv.FormatUint(rt.FS, 10)
		}
		fmt.Printf("%-7s %5s ms %5s ms %5s ms %5s ms | %9s %9s | %6d %5d %6s\n", name, ms(median(t)), ms(quantile(t, 0.25)), ms(quantile(t, 0.75)), ms(slices.Min(t)),
			adds, pair, rt.Ioctls, rt.HostIoctls, fsCount)
	}
	fmt.Println("ioctls: /dev/dxg ioctls of one start (dxgsim); host: the round trips to the Windows host they cause (those WSL forwards, plus the driver making and destroying the process's process object at its open and last close); fs: file system requests to the lib dir and drivers dir (latencyfs), each a round trip on WSL's 9p")
	for _, name := range []string{"hook", "boot", "cold", "cdihook", "wrapper", "nvcdi"} {
		if rt := counts[name]; rt.HasFS {
			fmt.Printf("%s fs requests by kind: %s\n", name, byOp(rt.FSByOp))
		}
	}
	floor := times["emptygo"]
	for _, name := range []string{"hook", "boot", "cold", "cdihook", "wrapper"} {
		if len(floor) > 0 && len(times[name]) > 0 {
			fmt.Printf("%s over the empty Go hook: %s ms (medians), paired: %s ms\n", name,
				ms(median(times[name])-median(floor)), ms(median(paired(times[name], floor))))
		}
	}
	nv := median(paired(times["nvcdi"], plain))
	for _, name := range []string{"hook", "boot", "cold", "cdihook", "wrapper"} {
		if d := median(paired(times[name], plain)); d > 0 {
			fmt.Printf("NVIDIA's shape adds %.1f times what %s adds (paired medians, %s / %s ms)\n", float64(nv)/float64(d), name, ms(nv), ms(d))
		}
	}
}

func byOp(m map[string]uint64) string {
	var parts []string
	for op, n := range m {
		if op != "total" {
			parts = append(parts, fmt.Sprintf("%s %d", op, n))
		}
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}

func copyFile(src, dst string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, data, 0o755)
}

// removeCgroupParents removes the parent cgroup runc made in each
// hierarchy; runc removes only the containers' own.
func removeCgroupParents() {
	dirs, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup/*", cgroupParent))
	dirs = append(dirs, filepath.Join("/sys/fs/cgroup", cgroupParent))
	for _, d := range dirs {
		os.Remove(d)
	}
}

// knowsKeys reports whether the hook binary takes the configuration at
// config: run on a state it cannot read, it fails after loading the
// configuration, and names any key it does not know.
func knowsKeys(binary, config string) bool {
	cmd := exec.Command(binary, "--config", config, "prestart")
	cmd.Stdin = strings.NewReader("{}")
	out, _ := cmd.CombinedOutput()
	return !strings.Contains(string(out), "unknown key")
}
