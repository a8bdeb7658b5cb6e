package main

// Benchmarks of the hook's phases and of whole hook runs, on the simulated
// NVIDIA laptop host. `make bench` runs them. They need root (mount
// namespaces, mknod) and gcc (the fixture's ELF libraries); when the test
// binary is not yet under dxgsim, benchMain re-runs it under dxgsim so the
// /dev/dxg ioctls reach the simulator exactly as the shipped binary's would.

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/config"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/devnode"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/driverstore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/dxcore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/gpuhost"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/edits"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/gpuplan"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/hooklog"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/hookrun"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/ldcache"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/mounts"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/fixture"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/privileged"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/simhost"
)

const (
	benchProfile = "nvidia-laptop"
	benchEnvDir  = "WSL_GPU_BENCH_DIR" // set in the re-run under dxgsim
)

func TestMain(m *testing.M) {
	flag.Parse()
	if f := flag.Lookup("test.bench"); f != nil && f.Value.String() != "" && os.Getenv(benchEnvDir) == "" && os.Geteuid() == 0 {
		os.Exit(benchUnderSim())
	}
	os.Exit(m.Run())
}

// benchUnderSim prepares the simulated host and re-runs this test binary
// under dxgsim with the same arguments.
func benchUnderSim() int {
	dir, err := os.MkdirTemp("", "wsl-gpu-bench-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	fail := func(err error) int {
		fmt.Fprintf(os.Stderr, "bench setup: %v\n", err)
		return 1
	}
	repo, err := filepath.Abs("../..")
	if err != nil {
		return fail(err)
	}
	sim := filepath.Join(dir, "dxgsim")
	hook := filepath.Join(dir, "wsl-gpu-hook")
	for _, b := range [][]string{
		{"build", "-o", sim, "./test/dxgsim"},
		{"build", "-trimpath", "-ldflags", "-s -w", "-o", hook, "./cmd/wsl-gpu-hook"},
	} {
		cmd := exec.Command("go", b...)
		cmd.Dir = repo
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fail(fmt.Errorf("go %s: %v\n%s", strings.Join(b, " "), err, out))
		}
	}
	p, err := simhost.Lookup(benchProfile)
	if err != nil {
		return fail(err)
	}
	cache, _ := fixture.DefaultCacheDir()
	if err := fixture.Build(filepath.Join(dir, "host"), p, fixture.Options{CacheDir: cache}); err != nil {
		return fail(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "dev"), 0o755); err != nil {
		return fail(err)
	}
	args := append([]string{"--profile", benchProfile, "--dev", filepath.Join(dir, "dev", "dxg"), "--", os.Args[0]}, os.Args[1:]...)
	cmd := exec.Command(sim, args...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), benchEnvDir+"="+dir)
	if err := cmd.Run(); err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		}
		return fail(err)
	}
	return 0
}

// benchHost is the simulated host the re-run sees.
type benchHost struct {
	dir    string
	hook   string
	cfg    config.Config
	cfgArg string
}

func newBenchHost(b *testing.B) *benchHost {
	b.Helper()
	dir := os.Getenv(benchEnvDir)
	if dir == "" {
		b.Skip("needs root: run through `make bench` (the benchmarks run under dxgsim)")
	}
	cfg := config.Default()
	cfg.DxgDevice = filepath.Join(dir, "dev", "dxg")
	cfg.LibDir = filepath.Join(dir, "host", fixture.LibDir)
	cfg.DriversDir = filepath.Join(dir, "host", fixture.DriversDir)
	cfg.LogFile = filepath.Join(dir, "hook.log")
	cfgArg := filepath.Join(dir, "config.toml")
	toml := fmt.Sprintf("dxg_device = %q\nlib_dir = %q\ndrivers_dir = %q\nlog_file = %q\n", cfg.DxgDevice, cfg.LibDir, cfg.DriversDir, cfg.LogFile)
	if err := os.WriteFile(cfgArg, []byte(toml), 0o644); err != nil {
		b.Fatal(err)
	}
	return &benchHost{dir: dir, hook: filepath.Join(dir, "wsl-gpu-hook"), cfg: cfg, cfgArg: cfgArg}
}

// bundle makes a bundle whose rootfs looks like a Debian image to the hook:
// the glibc loader and the host's (Debian 12) loader cache.
func (h *benchHost) bundle(b *testing.B) string {
	b.Helper()
	// On tmpfs, so the figures are the hook's and not this machine's disk:
	// creating an inode on its ext4 (online discard) takes ~0.9 ms.
	bundle, err := os.MkdirTemp("/dev/shm", "wsl-gpu-bench-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(bundle) })
	root := filepath.Join(bundle, "rootfs")
	for _, d := range []string{"lib64", "etc/ld.so.conf.d", "dev", "usr/bin"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			b.Fatal(err)
		}
	}
	cache, err := os.ReadFile("/etc/ld.so.cache")
	if err != nil {
		b.Skipf("no host loader cache to model a Debian image: %v", err)
	}
	must(b, os.WriteFile(filepath.Join(root, "etc/ld.so.cache"), cache, 0o644))
	must(b, os.WriteFile(filepath.Join(root, "lib64/ld-linux-x86-64.so.2"), []byte("\x7fELF"), 0o755))
	spec := `{"ociVersion":"1.0.2","root":{"path":"rootfs"},"process":{"env":["PATH=/bin","NVIDIA_VISIBLE_DEVICES=all"]},"linux":{"resources":{"devices":[{"allow":false,"access":"rwm"}]}}}`
	must(b, os.WriteFile(filepath.Join(bundle, "config.json"), []byte(spec), 0o644))
	return bundle
}

func must(b *testing.B, err error) {
	b.Helper()
	if err != nil {
		b.Fatal(err)
	}
}

func state(bundle string, pid int) string {
	return fmt.Sprintf(`{"ociVersion":"1.0.2","id":"bench","status":"creating","pid":%d,"bundle":%q}`, pid, bundle)
}

func BenchmarkReadInput(b *testing.B) {
	h := newBenchHost(b)
	bundle := h.bundle(b)
	st := state(bundle, 1)
	b.ResetTimer()
	for b.Loop() {
		cfg, err := config.Load(h.cfgArg, true)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := hookrun.OCI(gpuplan.Prestart, cfg, strings.NewReader(st)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReadInputCDI: what the CDI hook reads before it decides, side
// by side: a spec of before #23 (no arguments: the selections from
// config.json's environment, a Docker-sized config) and now (the
// selection as the argument, the root filesystem from the working
// directory). Each runs as runc runs the hook: in a mount namespace where
// the root filesystem is bound onto itself, its working directory, which
// the entry proves the container's (package hookroot) and holds open.
func BenchmarkReadInputCDI(b *testing.B) {
	h := newBenchHost(b)
	bundle := h.bundle(b)
	docker, err := os.ReadFile("../../pkg/start/oci/testdata/config-docker-like.json")
	if err != nil {
		b.Fatal(err)
	}
	var spec map[string]any
	must(b, json.Unmarshal(docker, &spec))
	spec["root"] = map[string]any{"path": "rootfs"}
	proc := spec["process"].(map[string]any)
	proc["env"] = append(proc["env"].([]any), "WSL_GPU_CDI_NVIDIA_COM_GPU_ALL=vendor:nvidia")
	data, err := json.Marshal(spec)
	must(b, err)
	must(b, os.WriteFile(filepath.Join(bundle, "config.json"), data, 0o644))
	rootfs := filepath.Join(bundle, "rootfs")
	st := state(bundle, 1)
	for _, tt := range []struct {
		name string
		args []string
	}{{"config.json", nil}, {"args", []string{"vendor:nvidia"}}} {
		b.Run(tt.name, func(b *testing.B) {
			err := privileged.InPrivateMountNS(func() error {
				if err := unix.Mount(rootfs, rootfs, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
					return err
				}
				if err := unix.Chdir(rootfs); err != nil {
					return err
				}
				b.ResetTimer()
				for range b.N {
					j, err := hookrun.CDI(strings.NewReader(st), tt.args)
					if err != nil || j.Done != "" || j.Resolve == nil || j.Rootfs != rootfs {
						return fmt.Errorf("%+v, %v", j, err)
					}
					j.Close()
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
		})
	}
}

func BenchmarkEnumerate(b *testing.B) {
	h := newBenchHost(b)
	for b.Loop() {
		if _, err := dxcore.Enumerate(h.cfg.DxgDevice); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPlan(b *testing.B) {
	h := newBenchHost(b)
	bundle := h.bundle(b)
	in, err := hookrun.OCI(gpuplan.Prestart, h.cfg, strings.NewReader(state(bundle, 1)))
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := planFor(h.cfg, in); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkInventory(b *testing.B) {
	h := newBenchHost(b)
	enum, err := dxcore.Enumerate(h.cfg.DxgDevice)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := driverstore.Build(enum.Adapters, driverstore.Options{LibDir: h.cfg.LibDir, DriversDir: h.cfg.DriversDir}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkLdcacheScan(b *testing.B) {
	h := newBenchHost(b)
	for b.Loop() {
		if _, err := ldcache.ScanDir(h.cfg.LibDir, edits.ContainerLibDir); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkApply carries out the plan in a fresh private mount namespace
// each time (made outside the timer), as a new container's would be.
func BenchmarkApply(b *testing.B) {
	h := newBenchHost(b)
	bundle := h.bundle(b)
	in, err := hookrun.OCI(gpuplan.Prestart, h.cfg, strings.NewReader(state(bundle, 1)))
	if err != nil {
		b.Fatal(err)
	}
	log := hooklog.Discard()
	p, err := planFor(h.cfg, in)
	if err != nil {
		b.Fatal(err)
	}
	plan := p.Steps
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		err := privileged.InPrivateMountNS(func() error {
			os.Remove(filepath.Join(in.Rootfs, "dev/dxg"))
			b.StartTimer()
			defer b.StopTimer()
			return mounts.Apply(in.Rootfs, plan, log)
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHookRun is a whole hook run as runc makes it: exec of the static
// binary with the state on stdin, config load, enumeration, plan, device
// cgroup, entering the container's mount namespace, apply, loader cache.
// The "container" is a process in its own private mount namespace, started
// outside the timer.
func BenchmarkHookRun(b *testing.B) {
	h := newBenchHost(b)
	bundle := h.bundle(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		ctr := exec.Command("unshare", "--mount", "--propagation", "private", "sleep", "60")
		if err := ctr.Start(); err != nil {
			b.Fatal(err)
		}
		waitMountNS(b, ctr.Process.Pid)
		os.Remove(filepath.Join(bundle, "rootfs/dev/dxg"))
		hook := exec.Command(h.hook, "--config", h.cfgArg, "prestart")
		hook.Stdin = strings.NewReader(state(bundle, ctr.Process.Pid))
		var stderr bytes.Buffer
		hook.Stderr = &stderr
		b.StartTimer()
		err := hook.Run()
		b.StopTimer()
		ctr.Process.Kill()
		ctr.Wait()
		if err != nil {
			b.Fatalf("hook: %v: %s", err, stderr.String())
		}
	}
}

// waitMountNS waits until pid has left our mount namespace (unshare has run).
// planFor is the hook's way from input to plan: stat, probe, decide.
func planFor(cfg config.Config, in *hookrun.Job) (gpuplan.Plan, error) {
	node, err := devnode.Stat(cfg.DxgDevice)
	if err != nil {
		return gpuplan.Plan{}, err
	}
	host, _, err := gpuhost.Probe(node, hookrun.HostOptions(cfg))
	if err != nil {
		return gpuplan.Plan{}, err
	}
	return gpuplan.Decide(in.Container, host)
}

func waitMountNS(b *testing.B, pid int) {
	self, err := os.Readlink("/proc/self/ns/mnt")
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < 10000; i++ {
		if ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", pid)); err == nil && ns != self {
			if exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); strings.HasSuffix(exe, "/sleep") {
				return
			}
		}
		runtime.Gosched()
	}
	b.Fatal("container stand-in never entered its mount namespace")
}
