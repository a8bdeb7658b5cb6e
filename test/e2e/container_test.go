package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/fixture"
)

// hookMode says how the container's OCI hook entry is written.
type hookMode int

const (
	// noHook: config.json has no hook at all.
	noHook hookMode = iota
	// hookConfig: `wsl-gpu-hook --config <per-test toml> STAGE`, the toml
	// pointing the hook at the simulator's node and the fixture tree.
	hookConfig
	// hookDefault: no --config, so the shipped defaults (real WSL paths);
	// only meaningful with sim.bindHost, which puts the fixture there.
	// runc then runs in a mount namespace of its own with outcome.run
	// bound at /run, so the default probe cache (/run/wsl-gpu-hook) is
	// written there and never on the machine.
	hookDefault
)

// box describes one container run.
type box struct {
	image  string  // imageDebian or imageBusybox
	checks []check // what the container runs, in order
	env    []string
	// annotations go into config.json (and so into the hook's state).
	annotations map[string]string
	readonly    bool // root.readonly

	hook  hookMode
	stage string // "prestart" (default), "createRuntime" or "createContainer"
	// alsoStages run the same hook again at these stages: real setups
	// configure it twice (Docker's --gpus hook next to the wrapper's).
	alsoStages []string
	// argv0 is the hook's args[0]; "" means "wsl-gpu-hook". With
	// "nvidia-container-runtime-hook" the hook path is a link of that name,
	// as Docker finds it on PATH.
	argv0 string

	devices []specs.LinuxDevice       // linux.devices
	rules   []specs.LinuxDeviceCgroup // appended to linux.resources.devices
	mounts  []specs.Mount             // appended to mounts, as a CDI engine adds them

	sim *simulation // nil: run runc directly, with no simulated WSL host
	// withHookBinary copies the static hook into /usr/local/bin, so the
	// container can run `wsl-gpu-hook info`.
	withHookBinary bool
	// wantProtocolMisuse expects dxgsim's exit status 3: the command tree
	// misused the dxg protocol (leaked an adapter handle, for one).
	wantProtocolMisuse bool
	// hashRootfs records the root file system before and after the run
	// (outcome.rootfsDiff).
	hashRootfs bool
	// prepare changes the extracted image before the run: hostile images.
	prepare func(t *testing.T, rootfs string)
	// imageDev drops the runtime's tmpfs on /dev: the container uses the
	// image's own /dev, with whatever nodes the image put there.
	imageDev bool
	// userns runs the container in its own user namespace, root mapped to
	// host uid 100000, as rootless engines and userns-remap do.
	userns bool
	// wrapper runs the container through wsl-gpu-runtime (the hook binary
	// under that name, configured by WSL_GPU_HOOK_CONFIG) instead of runc.
	wrapper bool
	// cdi names CDI devices to inject into config.json, as an engine does,
	// from the specs `wsl-gpu-hook cdi generate` writes for the simulated host.
	cdi []string
	// cdiLegacyHook replaces the injected hooks with the one hook a spec
	// written before #23 had: `cdi-hook` with no selection argument.
	cdiLegacyHook bool
	// configMode is config.json's mode (default 0644); engines write it
	// for root alone (0600).
	configMode os.FileMode
	// noDevicesCgroup runs the hook in a mount namespace of its own without
	// the cgroup v1 devices hierarchy: the cgroup files it must change are
	// missing where it looks (runc itself refuses to start without them).
	noDevicesCgroup bool
	// probeCache is the hook's probe_cache; "" gives the box one of its
	// own, so its start is cold. Boxes that share one see warm starts.
	probeCache string
	// sysfs is the hook's sysfs_dir (a tree fixture.SysfsDevices wrote);
	// "" keeps the default, this machine's /sys, where no dxgkrnl is.
	sysfs string
	// devDir is where dxgsim makes the node; "" gives the box one of its
	// own. The probe cache is per device path: boxes that share a cache
	// share this too.
	devDir string
	// syslog is the hook's log_syslog; "" keeps the default, /dev/log.
	syslog string
	// wrapHooks, when set, replaces each createContainer hook once the
	// spec is complete (CDI devices injected): a hook run another way
	// than runc runs it, or under test/stepkill. dir is the run's work
	// dir.
	wrapHooks func(t *testing.T, h specs.Hook, dir string) specs.Hook
	// restart starts the container of an earlier run again, as docker
	// restart does: the same work dir, bundle, root file system as that
	// run left it, and id. Nothing is extracted or prepared again.
	restart *outcome
}

// simulation is how dxgsim wraps runc.
type simulation struct {
	profile string
	faults  []string
	// bindHost runs runc in a private mount namespace where the fixture's
	// /usr/lib/wsl and the simulated node sit at the real WSL paths.
	bindHost bool
	// breakHost, when set, runs on a private copy of the fixture before
	// the run: the Windows side's file faults (a folder missing, a file
	// where a folder belongs). The hook config and the leak checks use
	// the copy.
	breakHost func(t *testing.T, host string)
}

// check is one command the container runs; its output and exit status are
// reported under name.
type check struct {
	name string
	cmd  string // a shell command line
}

// checkResult is what one check printed (stdout and stderr together).
type checkResult struct {
	out  string
	code int
}

// outcome is everything a container run left to assert on.
type outcome struct {
	dir     string // work dir: bundle/, state/, dev/, hook.toml, hook.log
	run     string // what runc saw at /run (hookDefault), under dir
	rootfs  string
	fixture string // "" without a simulator

	exitCode int // runc's (or dxgsim's) exit status; 0 on success
	stdout   string
	stderr   string
	checks   map[string]checkResult
	hookLog  string
	report   string // dxgsim --report
	// rootfsDiff lists what the run changed in the root file system
	// (box.hashRootfs); "" if nothing.
	rootfsDiff string
}

// containerPATH is what images expect; LD_LIBRARY_PATH is deliberately
// absent: the hook must make libcuda findable through the loader cache.
const containerPATH = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// runBox builds a bundle for b, runs it with runc (under dxgsim when b.sim
// is set), deletes the container, checks the host for leaks and returns
// what happened. It fails the test only for harness problems and leaks;
// the container's own results are the caller's to judge.
func runBox(t *testing.T, b box) *outcome {
	t.Helper()
	h := env(t)
	o := &outcome{checks: map[string]checkResult{}}

	dir := ""
	if b.restart != nil {
		dir = b.restart.dir // removed with the first run's test
	} else {
		var err error
		if dir, err = os.MkdirTemp(h.tmp, "c-"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if h.keep == "1" || h.keep == "failed" && t.Failed() {
				t.Logf("kept work dir %s", dir)
				return
			}
			removeWorkDir(t, dir)
		})
	}
	o.dir = dir
	id := "wsl-gpu-hook-e2e-" + strings.TrimPrefix(filepath.Base(dir), "c-")
	bundle := filepath.Join(dir, "bundle")
	o.rootfs = filepath.Join(bundle, "rootfs")

	// Everything that may not build yet comes first, before the costly
	// image extraction.
	var hookBin string
	if b.hook != noHook || b.withHookBinary || b.wrapper || len(b.cdi) > 0 {
		hookBin = need(t, "build wsl-gpu-hook", h.hook)
	}
	if b.sim != nil {
		need(t, "build dxgsim", h.dxgsim)
		o.fixture = h.needFixture(t, b.sim.profile)
		switch {
		case b.sim.breakHost != nil && b.restart != nil:
			o.fixture = b.restart.fixture // the broken copy it made
		case b.sim.breakHost != nil:
			o.fixture = brokenCopy(t, o.fixture, filepath.Join(dir, "host"), b.sim.breakHost)
		}
	}
	if b.restart == nil {
		makeRootfs(t, h, b, hookBin, o.rootfs)
	}

	devDir := filepath.Join(dir, "dev")
	if b.devDir != "" {
		devDir = b.devDir
	}
	if err := os.MkdirAll(devDir, 0o755); err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "hook.toml")
	logPath := filepath.Join(dir, "hook.log")
	if b.hook == hookConfig || b.wrapper || len(b.cdi) > 0 {
		if o.fixture == "" {
			t.Fatal("harness: a hook with a test config needs a simulated host (box.sim)")
		}
		c := hookConfigFor(cfgPath, filepath.Join(devDir, "dxg"), o.fixture, logPath)
		if b.probeCache != "" {
			c.ProbeCache = b.probeCache
		}
		c.Sysfs = b.sysfs
		c.Syslog = b.syslog
		if err := c.Write(cfgPath); err != nil {
			t.Fatal(err)
		}
	}

	spec := buildSpec(t, b, h, hookBin, cfgPath, id)
	if len(b.cdi) > 0 {
		injectCDI(t, h, b, spec, hookBin, cfgPath, dir)
	}
	if b.wrapHooks != nil && spec.Hooks != nil {
		for i, hk := range spec.Hooks.CreateContainer {
			spec.Hooks.CreateContainer[i] = b.wrapHooks(t, hk, dir)
		}
	}
	data, err := json.MarshalIndent(spec, "", "\t")
	if err != nil {
		t.Fatal(err)
	}
	mode := b.configMode
	if mode == 0 {
		mode = 0o644
	}
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), data, mode); err != nil {
		t.Fatal(err)
	}

	runtime, prefix := "runc", []string(nil)
	if b.wrapper {
		runtime = linkNamed(t, hookBin, "wsl-gpu-runtime")
		prefix = []string{"env", configEnv + "=" + cfgPath}
	}
	if b.hook == hookDefault {
		// Inside dxgsim's namespace (its fixture and node stay visible),
		// a private one where /run is a directory of this run's: the
		// host's /run is left alone, and the test can read what the
		// hook kept there.
		o.run = filepath.Join(dir, "run")
		if err := os.Mkdir(o.run, 0o755); err != nil {
			t.Fatal(err)
		}
		prefix = append([]string{"unshare", "--mount", "--propagation", "private", "--",
			"sh", "-c", `mount --bind "$0" /run && exec "$@"`, o.run}, prefix...)
	}
	runcArgs := append(prefix, runtime, "--root", filepath.Join(dir, "state"), "run", "--bundle", bundle, id)
	argv := runcArgs
	if b.sim != nil {
		argv = simArgs(t, h, b.sim, devDir, filepath.Join(dir, "sim-report"), o.fixture, runcArgs)
	}

	var rootBefore map[string]string
	if b.hashRootfs {
		if rootBefore, err = treeDigest(o.rootfs); err != nil {
			t.Fatalf("hash rootfs: %v", err)
		}
	}
	before := snapshotHost(t, o.fixture, dir)
	o.exitCode, o.stdout, o.stderr = execute(t, argv)
	deleteContainer(t, filepath.Join(dir, "state"), id)
	before.checkHost(t, o.fixture)
	if b.hashRootfs {
		rootAfter, err := treeDigest(o.rootfs)
		if err != nil {
			t.Fatalf("hash rootfs: %v", err)
		}
		o.rootfsDiff = diffTrees(rootBefore, rootAfter)
	}
	if entries, err := os.ReadDir(bundle); err == nil {
		for _, e := range entries {
			if e.Name() != "config.json" && e.Name() != "rootfs" {
				t.Errorf("the run created %s in the bundle, outside the rootfs", e.Name())
			}
		}
	}

	if data, err := os.ReadFile(logPath); err == nil {
		o.hookLog = string(data)
	}
	if data, err := os.ReadFile(filepath.Join(dir, "sim-report")); err == nil {
		o.report = string(data)
	}
	o.checks = parseChecks(o.stdout)
	if b.sim != nil {
		switch {
		case o.exitCode == 3 && !b.wantProtocolMisuse:
			t.Errorf("dxgsim exit 3: the hook or the container misused the dxg protocol\n%s", o.debug())
		case o.exitCode != 3 && b.wantProtocolMisuse:
			t.Errorf("dxgsim exit %d, want 3 (protocol misuse)\n%s", o.exitCode, o.debug())
		}
	}
	return o
}

// makeRootfs extracts b's image at rootfs, adds the probes (and the hook,
// when b wants it) and lets b prepare it.
func makeRootfs(t *testing.T, h *harness, b box, hookBin, rootfs string) {
	t.Helper()
	probes := h.needProbes(t)
	image := need(t, "image "+b.image, h.images[b.image])
	if err := extractImage(image, rootfs); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{probes.cudaprobe, probes.fsprobe, probes.rocprobe, probes.d3d12probe} {
		if err := copyFile(p, filepath.Join(rootfs, "usr/local/bin", filepath.Base(p)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if b.withHookBinary {
		// wsl-gpu-ctl too: the hook hands info to the one beside it.
		for _, name := range []string{"wsl-gpu-hook", "wsl-gpu-ctl"} {
			if err := copyFile(filepath.Join(filepath.Dir(hookBin), name), filepath.Join(rootfs, "usr/local/bin", name), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	if b.prepare != nil {
		b.prepare(t, rootfs)
	}
}

func buildSpec(t *testing.T, b box, h *harness, hookBin, cfgPath, id string) *specs.Spec {
	t.Helper()
	tmpl, err := h.runcSpec()
	if err != nil {
		t.Fatal(err)
	}
	var spec specs.Spec
	if err := json.Unmarshal(tmpl, &spec); err != nil {
		t.Fatalf("decode runc spec: %v", err)
	}
	spec.Process.Terminal = false
	spec.Process.Args = []string{"/bin/sh", "-c", checkScript(b.checks)}
	spec.Process.Env = append([]string{containerPATH}, b.env...)
	spec.Root = &specs.Root{Path: "rootfs", Readonly: b.readonly}
	spec.Hostname = "e2e"
	spec.Annotations = b.annotations
	spec.Linux.CgroupsPath = "/" + cgroupParent + "/" + id
	spec.Linux.Devices = append(spec.Linux.Devices, b.devices...)
	if spec.Linux.Resources == nil {
		spec.Linux.Resources = &specs.LinuxResources{}
	}
	spec.Linux.Resources.Devices = append(spec.Linux.Resources.Devices, b.rules...)
	spec.Mounts = append(spec.Mounts, b.mounts...)
	if b.userns {
		spec.Linux.Namespaces = append(spec.Linux.Namespaces, specs.LinuxNamespace{Type: specs.UserNamespace})
		spec.Linux.UIDMappings = []specs.LinuxIDMapping{{ContainerID: 0, HostID: 100000, Size: 65536}}
		spec.Linux.GIDMappings = []specs.LinuxIDMapping{{ContainerID: 0, HostID: 100000, Size: 65536}}
	}
	if b.imageDev {
		var keep []specs.Mount
		for _, m := range spec.Mounts {
			if m.Destination != "/dev" {
				keep = append(keep, m)
			}
		}
		spec.Mounts = keep
	}

	if b.hook == noHook {
		spec.Hooks = nil
		return &spec
	}
	stage := b.stage
	if stage == "" {
		stage = "prestart"
	}
	hook := specs.Hook{Path: hookBin, Args: []string{"wsl-gpu-hook"}}
	if b.argv0 != "" {
		hook.Args[0] = b.argv0
		// Docker runs the executable of that name it found on PATH.
		link := filepath.Join(filepath.Dir(hookBin), b.argv0)
		if err := os.Symlink(hookBin, link); err != nil && !errors.Is(err, os.ErrExist) {
			t.Fatal(err)
		}
		hook.Path = link
	}
	if b.hook == hookConfig {
		hook.Args = append(hook.Args, "--config", cfgPath)
	}
	hook.Args = append(hook.Args, stage)
	if b.noDevicesCgroup {
		unshare, err := exec.LookPath(devicesHidden[0])
		if err != nil {
			t.Fatal(err)
		}
		hook.Args = append(append(append([]string{}, devicesHidden...), hook.Path), hook.Args[1:]...)
		hook.Path = unshare
	}
	spec.Hooks = &specs.Hooks{}
	for _, stage := range append([]string{stage}, b.alsoStages...) {
		h := hook
		h.Args = append(append([]string{}, hook.Args[:len(hook.Args)-1]...), stage)
		switch stage {
		case "prestart":
			spec.Hooks.Prestart = append(spec.Hooks.Prestart, h) //nolint:staticcheck // Docker still uses prestart.
		case "createRuntime":
			spec.Hooks.CreateRuntime = append(spec.Hooks.CreateRuntime, h)
		case "createContainer":
			spec.Hooks.CreateContainer = append(spec.Hooks.CreateContainer, h)
		default:
			t.Fatalf("harness: unknown hook stage %q", stage)
		}
	}
	return &spec
}

// writeHookConfig points the hook at the simulator's node and the fixture
// tree host instead of the real WSL paths, and logs at debug into the work
// dir.
func writeHookConfig(t *testing.T, path, dxg, host, logFile string) {
	t.Helper()
	if err := hookConfigFor(path, dxg, host, logFile).Write(path); err != nil {
		t.Fatal(err)
	}
}

// hookConfigFor is writeHookConfig's configuration. The probe cache and
// the kept SONAMEs live in the work dir (the config's, which exists, as
// the hook never makes a SONAME dir): boxes never share them, and /run
// and /var/cache are left alone.
func hookConfigFor(path, dxg, host, logFile string) fixture.Config {
	return fixture.Config{Dxg: dxg, Host: host, LogFile: logFile, LogLevel: "debug", Vendors: true,
		ProbeCache: filepath.Join(filepath.Dir(path), "probe-cache"), SonameCache: filepath.Dir(path)}
}

// brokenCopy copies the fixture to dst and lets breakHost damage the copy.
func brokenCopy(t *testing.T, fixture, dst string, breakHost func(t *testing.T, host string)) string {
	t.Helper()
	if out, err := exec.Command("cp", "-a", fixture, dst).CombinedOutput(); err != nil {
		t.Fatalf("copy fixture: %v %s", err, out)
	}
	breakHost(t, dst)
	return dst
}

// devicesHidden is the wrapper that unmounts the cgroup v1 devices
// hierarchy in a private mount namespace before it runs its arguments.
var devicesHidden = []string{"unshare", "--mount", "--propagation", "private", "sh", "-c",
	`for m in $(awk '$3 == "cgroup" && $4 ~ /(^|,)devices(,|$)/ {print $2}' /proc/self/mounts); do umount "$m"; done; exec "$@"`, "sh"}

func simArgs(t *testing.T, h *harness, sim *simulation, devDir, report, fixture string, cmd []string) []string {
	t.Helper()
	bin := need(t, "build dxgsim", h.dxgsim)
	argv := []string{bin, "--profile", sim.profile, "--dev", filepath.Join(devDir, "dxg"), "--report", report}
	for _, f := range sim.faults {
		argv = append(argv, "--fault", f)
	}
	if sim.bindHost {
		argv = append(argv, "--bind-host", fixture)
	}
	return append(append(argv, "--"), cmd...)
}

// runTimeout bounds a hung runtime; it is a safety net, not an assertion.
const runTimeout = 3 * time.Minute

// execute runs argv and returns its exit status and output; a command that
// could not start at all fails the test.
func execute(t *testing.T, argv []string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 10 * time.Second
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, stdout.String(), stderr.String()
	case errors.As(err, &exit) && ctx.Err() == nil:
		return exit.ExitCode(), stdout.String(), stderr.String()
	default:
		t.Fatalf("run %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(argv, " "), err, stdout.String(), stderr.String())
		return -1, "", ""
	}
}

// deleteContainer removes the container whatever state the run left it in.
func deleteContainer(t *testing.T, state, id string) {
	t.Helper()
	out, err := exec.Command("runc", "--root", state, "delete", "-f", id).CombinedOutput()
	if err != nil && !bytes.Contains(out, []byte("does not exist")) && !bytes.Contains(out, []byte("not exist")) {
		t.Logf("runc delete -f %s: %v: %s", id, err, out)
	}
}

// checkScript runs each check, framing its output so parseChecks can
// split it; the script always exits 0 so runc's status is the start's.
func checkScript(checks []check) string {
	var s strings.Builder
	for _, c := range checks {
		fmt.Fprintf(&s, "echo '@@begin %s'\n{ %s\n} 2>&1\necho \"@@end %s $?\"\n", c.name, c.cmd, c.name)
	}
	s.WriteString("exit 0\n")
	return s.String()
}

var checkEnd = regexp.MustCompile(`^@@end (\S+) (\d+)$`)

func parseChecks(stdout string) map[string]checkResult {
	res := map[string]checkResult{}
	var name string
	var body []string
	for _, line := range strings.Split(stdout, "\n") {
		if n, ok := strings.CutPrefix(line, "@@begin "); ok {
			name, body = n, nil
			continue
		}
		if m := checkEnd.FindStringSubmatch(line); m != nil && m[1] == name {
			code, _ := strconv.Atoi(m[2])
			res[name] = checkResult{out: strings.Join(body, "\n"), code: code}
			name = ""
			continue
		}
		if name != "" {
			body = append(body, line)
		}
	}
	return res
}

// result returns a check's result, failing the test if the check never
// ran (the container did not start, or the script broke).
func (o *outcome) result(t *testing.T, name string) checkResult {
	t.Helper()
	r, ok := o.checks[name]
	if !ok {
		t.Fatalf("check %q did not run in the container\n%s", name, o.debug())
	}
	return r
}

// succeeds asserts a check exited 0 and returns its output.
func (o *outcome) succeeds(t *testing.T, name string) string {
	t.Helper()
	r := o.result(t, name)
	if r.code != 0 {
		t.Errorf("check %s: exit %d, want 0:\n%s", name, r.code, r.out)
	}
	return r.out
}

// started asserts the container ran: runc (and dxgsim) exited 0.
func (o *outcome) started(t *testing.T) {
	t.Helper()
	if o.exitCode != 0 {
		t.Fatalf("container did not run: exit %d\n%s", o.exitCode, o.debug())
	}
}

// debug is what a failure message shows of a run.
func (o *outcome) debug() string {
	var b strings.Builder
	fmt.Fprintf(&b, "--- runc stderr:\n%s", o.stderr)
	fmt.Fprintf(&b, "--- container stdout:\n%s", o.stdout)
	if o.hookLog != "" {
		fmt.Fprintf(&b, "--- hook log:\n%s", o.hookLog)
	}
	if o.report != "" {
		fmt.Fprintf(&b, "--- dxgsim report:\n%s\n", o.report)
	}
	return b.String()
}
