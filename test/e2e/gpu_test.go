package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/moby/sys/mountinfo"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/probecache"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/fixture"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/simhost"
)

// Paths as a user sees them inside the container.
const (
	ctrLib     = "/usr/lib/wsl/lib"
	ctrDrivers = "/usr/lib/wsl/drivers"
	ctrLdConf  = "/etc/ld.so.conf.d/wsl-gpu-hook.conf"
	ctrSMI     = "/usr/bin/nvidia-smi"
)

// folder returns the driver store folder of the profile's adapter of kind.
func folder(t *testing.T, profile string, kind simhost.FolderKind) simhost.Adapter {
	t.Helper()
	p, err := simhost.Lookup(profile)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range p.Adapters {
		if a.Kind == kind {
			return a
		}
	}
	t.Fatalf("profile %s has no %s adapter", profile, kind)
	return simhost.Adapter{}
}

// exists is a check printing "present" or "absent" for a path (a dangling
// link counts as present: something was created there).
func exists(name, path string) check {
	return check{name, fmt.Sprintf("if [ -e %[1]s ] || [ -L %[1]s ]; then echo present; else echo absent; fi", path)}
}

func wantOutput(t *testing.T, o *outcome, name, want string) {
	t.Helper()
	if got := strings.TrimSpace(o.result(t, name).out); got != want {
		t.Errorf("check %s: got %q, want %q", name, got, want)
	}
}

func wantContains(t *testing.T, o *outcome, name, want string) {
	t.Helper()
	if got := o.result(t, name).out; !strings.Contains(got, want) {
		t.Errorf("check %s: output does not contain %q:\n%s", name, want, got)
	}
}

// mountOptions returns the per-mount options of mountpoint in a
// /proc/self/mountinfo dump, "" if it is not a mount point.
func mountOptions(dump, mountpoint string) string {
	ms, err := mountinfo.GetMountsFromReader(strings.NewReader(dump), mountinfo.SingleEntryFilter(mountpoint))
	if err != nil || len(ms) == 0 {
		return ""
	}
	return ms[len(ms)-1].Options // the last (topmost) mount wins
}

// TestNVIDIALaptopAll is the main user story: `all` GPUs on an Optimus
// laptop in a Debian container, then everything a CUDA user would try.
func TestNVIDIALaptopAll(t *testing.T) {
	h := env(t)
	t.Parallel()
	const profile = "nvidia-laptop"
	nv := folder(t, profile, simhost.FolderNVIDIA)
	intel := folder(t, profile, simhost.FolderIntel)
	nvDir := ctrDrivers + "/" + nv.Folder

	o := runBox(t, box{
		image:          imageDebian,
		sim:            &simulation{profile: profile},
		hook:           hookConfig,
		env:            []string{"WSL_GPU_DEVICES=all"},
		withHookBinary: true,
		checks: []check{
			{"dxg-node", "stat -c '%F %t:%T %a' /dev/dxg"},
			{"dxg-open", "fsprobe open-rw /dev/dxg"},
			{"drivers", "ls " + ctrDrivers},
			{"ld-conf", "cat " + ctrLdConf},
			{"ldconfig-p", "ldconfig -p | grep 'libcuda\\.so\\.1 '"},
			{"cudaprobe", "cudaprobe"},
			{"write-driver", "fsprobe create " + nvDir + "/e2e-write-test"},
			{"write-lib", "fsprobe create " + ctrLib + "/e2e-write-test"},
			{"mountinfo", "cat /proc/self/mountinfo"},
			{"smi-path", "command -v nvidia-smi"},
			{"smi", "nvidia-smi"},
			{"info", "wsl-gpu-hook info --json"},
		},
	})
	o.started(t)

	wantOutput(t, o, "dxg-node", "character special file a:e5 666")
	wantOutput(t, o, "dxg-open", "open-rw /dev/dxg: ok")
	wantOutput(t, o, "drivers", strings.Join(sorted(intel.Folder, nv.Folder), "\n"))
	if lines := strings.Fields(o.succeeds(t, "ld-conf")); !slices.Contains(lines, ctrLib) {
		t.Errorf("%s does not list %s: %q", ctrLdConf, ctrLib, lines)
	}
	wantContains(t, o, "ldconfig-p", "=> "+ctrLib+"/libcuda.so.1")

	cuda := o.succeeds(t, "cudaprobe")
	for _, want := range []string{"cudaprobe: loaded " + ctrLib + "/libcuda.so.1", "cuInit(0) = 0"} {
		if !strings.Contains(cuda, want) {
			t.Errorf("cudaprobe output lacks %q:\n%s", want, cuda)
		}
	}
	if strings.Contains(cuda, "cuDeviceGetCount") && !strings.Contains(cuda, "cuDeviceGetCount = 1 ") {
		t.Errorf("cudaprobe: want one CUDA device (the laptop's one NVIDIA GPU):\n%s", cuda)
	}

	for _, c := range []string{"write-driver", "write-lib"} {
		if got := o.result(t, c).out; !strings.Contains(got, ": EROFS ") {
			t.Errorf("check %s: creating a file succeeded or failed otherwise, want EROFS: %q", c, got)
		}
	}
	mi := o.succeeds(t, "mountinfo")
	for _, mp := range []string{ctrLib, ctrDrivers + "/" + intel.Folder, nvDir} {
		opts := strings.Split(mountOptions(mi, mp), ",")
		for _, want := range []string{"ro", "nosuid", "nodev"} {
			if !slices.Contains(opts, want) {
				t.Errorf("mount %s has options %q, want %s among them", mp, opts, want)
			}
		}
	}

	wantOutput(t, o, "smi-path", ctrSMI)
	if smi := o.succeeds(t, "smi"); !strings.Contains(smi, nv.Description) {
		t.Errorf("nvidia-smi does not name the GPU %q:\n%s", nv.Description, smi)
	}

	inside := decodeInfo(t, "container", o.succeeds(t, "info"))
	host := hostInfo(t, h, profile)
	if !reflect.DeepEqual(inside, host) {
		t.Errorf("wsl-gpu-hook info in the container lists other adapters than on the host:\ncontainer: %v\nhost:      %v", inside, host)
	}
	if len(host) != 2 {
		t.Errorf("host info lists %d adapters, want the profile's 2", len(host))
	}
}

func sorted(s ...string) []string {
	slices.Sort(s)
	return s
}

// hostInfo runs `wsl-gpu-hook info --json` on the simulated host and
// returns its adapters with host paths mapped to where the container sees
// them (the fixture prefix removed, the simulator's node at /dev/dxg).
func hostInfo(t *testing.T, h *harness, profile string) []any {
	t.Helper()
	dir := t.TempDir()
	fixture := h.needFixture(t, profile)
	cfg := filepath.Join(dir, "hook.toml")
	writeHookConfig(t, cfg, filepath.Join(dir, "dxg"), fixture, "")
	hook := need(t, "build wsl-gpu-hook", h.hook)
	argv := simArgs(t, h, &simulation{profile: profile}, dir, filepath.Join(dir, "report"), fixture,
		[]string{hook, "--config", cfg, "info", "--json"})
	code, stdout, stderr := execute(t, argv)
	if code != 0 {
		t.Fatalf("host: wsl-gpu-hook info --json: exit %d\n%s", code, stderr)
	}
	stdout = strings.ReplaceAll(stdout, fixture, "")
	return decodeInfo(t, "host", stdout)
}

func decodeInfo(t *testing.T, where, out string) []any {
	t.Helper()
	var rep struct {
		Adapters []any `json:"adapters"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%s: wsl-gpu-hook info --json: %v\n%s", where, err, out)
	}
	return rep.Adapters
}

// TestSelectors: which folders a request mounts, and where the request is
// read from (annotation over WSL_GPU_DEVICES over NVIDIA_VISIBLE_DEVICES).
func TestSelectors(t *testing.T) {
	env(t)
	const profile = "nvidia-laptop"
	nv := folder(t, profile, simhost.FolderNVIDIA)
	intel := folder(t, profile, simhost.FolderIntel)
	both := sorted(intel.Folder, nv.Folder)
	tests := []struct {
		name        string
		env         []string
		annotations map[string]string
		folders     []string // exactly these under /usr/lib/wsl/drivers
	}{
		{name: "vendor intel", env: []string{"WSL_GPU_DEVICES=intel"}, folders: []string{intel.Folder}},
		{name: "vendor nvidia", env: []string{"WSL_GPU_DEVICES=nvidia"}, folders: []string{nv.Folder}},
		{name: "index 1", env: []string{"WSL_GPU_DEVICES=1"}, folders: []string{nv.Folder}},
		{name: "LUID", env: []string{"WSL_GPU_DEVICES=" + fmt.Sprintf("0x%x", nv.LUIDLow)}, folders: []string{nv.Folder}},
		{name: "docker --gpus all", env: []string{"NVIDIA_VISIBLE_DEVICES=all"}, folders: both},
		{name: "index list", env: []string{"WSL_GPU_DEVICES=0,1"}, folders: both},
		// docker --gpus 1 sets NVIDIA_VISIBLE_DEVICES=0: the first NVIDIA
		// GPU, not adapter 0 (the Intel iGPU on this laptop).
		{name: "docker --gpus 1", env: []string{"NVIDIA_VISIBLE_DEVICES=0"}, folders: []string{nv.Folder}},
		{name: "WSL_GPU_DEVICES wins", env: []string{"NVIDIA_VISIBLE_DEVICES=all", "WSL_GPU_DEVICES=intel"}, folders: []string{intel.Folder}},
		{name: "annotation wins", env: []string{"WSL_GPU_DEVICES=all"}, annotations: map[string]string{"wsl-gpu-hook/devices": "nvidia"}, folders: []string{nv.Folder}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o := runBox(t, box{
				image:       imageBusybox,
				sim:         &simulation{profile: profile},
				hook:        hookConfig,
				env:         tt.env,
				annotations: tt.annotations,
				checks: []check{
					{"dxg-open", "fsprobe open-rw /dev/dxg"},
					{"drivers", "ls " + ctrDrivers},
					exists("lib", ctrLib+"/libdxcore.so"),
					exists("smi", ctrSMI),
				},
			})
			o.started(t)
			wantOutput(t, o, "dxg-open", "open-rw /dev/dxg: ok")
			wantOutput(t, o, "drivers", strings.Join(tt.folders, "\n"))
			wantOutput(t, o, "lib", "present")
			smi := "absent"
			if slices.Contains(tt.folders, nv.Folder) {
				smi = "present"
			}
			wantOutput(t, o, "smi", smi)
		})
	}
}

// TestNoRequest: a container that asks for no GPU gets nothing, and the
// hook leaves its root file system exactly as it was.
func TestNoRequest(t *testing.T) {
	env(t)
	sim := &simulation{profile: "nvidia-laptop"}
	tests := []struct {
		name  string
		image string
		sim   *simulation
		hook  hookMode
		env   []string
	}{
		// The control: runc alone must not change the root either.
		{name: "no hook", image: imageDebian},
		{name: "none", image: imageDebian, sim: sim, hook: hookConfig, env: []string{"WSL_GPU_DEVICES=none"}},
		{name: "no variable", image: imageDebian, sim: sim, hook: hookConfig},
		{name: "void (docker --gpus 0)", image: imageBusybox, sim: sim, hook: hookConfig, env: []string{"NVIDIA_VISIBLE_DEVICES=void"}},
		{name: "empty", image: imageBusybox, sim: sim, hook: hookConfig, env: []string{"NVIDIA_VISIBLE_DEVICES="}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o := runBox(t, box{
				image: tt.image, sim: tt.sim, hook: tt.hook, env: tt.env, hashRootfs: true,
				checks: []check{exists("dxg", "/dev/dxg"), exists("wsl", "/usr/lib/wsl"), exists("ld-conf", ctrLdConf)},
			})
			o.started(t)
			wantOutput(t, o, "dxg", "absent")
			wantOutput(t, o, "wsl", "absent")
			wantOutput(t, o, "ld-conf", "absent")
			if o.rootfsDiff != "" {
				t.Errorf("the root file system changed:\n%s", o.rootfsDiff)
			}
		})
	}
}

// TestBusyboxAll: an image with no C library still gets the GPU; the hook
// says in its log that it could not register the libraries with a loader.
func TestBusyboxAll(t *testing.T) {
	env(t)
	t.Parallel()
	o := runBox(t, box{
		image: imageBusybox,
		sim:   &simulation{profile: "nvidia-laptop"},
		hook:  hookConfig,
		env:   []string{"WSL_GPU_DEVICES=all"},
		checks: []check{
			{"dxg-open", "fsprobe open-rw /dev/dxg"},
			exists("lib", ctrLib+"/libdxcore.so"),
			exists("ld-conf", ctrLdConf),
			exists("ld-cache", "/etc/ld.so.cache"),
		},
	})
	o.started(t)
	wantOutput(t, o, "dxg-open", "open-rw /dev/dxg: ok")
	wantOutput(t, o, "lib", "present")
	// Nothing for a loader that is not there.
	wantOutput(t, o, "ld-conf", "absent")
	wantOutput(t, o, "ld-cache", "absent")
	warning := regexp.MustCompile(`(?m)^.*level=warning msg="[^"]*(loader|ldconfig|ld\.so)`)
	if !warning.MatchString(o.hookLog) {
		t.Errorf("the hook log has no warning about the image's missing loader cache:\n%s", o.hookLog)
	}
}

// TestHookStages: the same result whichever stage runs the hook, and with
// a read-only root (the hook writes the loader cache before runc makes the
// root read-only).
func TestHookStages(t *testing.T) {
	env(t)
	tests := []struct {
		stage    string
		readonly bool
	}{
		{stage: "prestart", readonly: true},
		{stage: "createRuntime"},
		{stage: "createContainer"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s readonly=%v", tt.stage, tt.readonly), func(t *testing.T) {
			t.Parallel()
			o := runBox(t, box{
				image: imageDebian, sim: &simulation{profile: "nvidia-laptop"},
				hook: hookConfig, stage: tt.stage, readonly: tt.readonly,
				env: []string{"WSL_GPU_DEVICES=nvidia"},
				checks: []check{
					{"dxg-open", "fsprobe open-rw /dev/dxg"},
					{"cudaprobe", "cudaprobe"},
					{"root-ro", "fsprobe create /e2e-write-test"},
				},
			})
			o.started(t)
			wantOutput(t, o, "dxg-open", "open-rw /dev/dxg: ok")
			o.succeeds(t, "cudaprobe")
			if ro := strings.Contains(o.result(t, "root-ro").out, "EROFS"); ro != tt.readonly {
				t.Errorf("root read-only = %v, want %v", ro, tt.readonly)
			}
		})
	}
}

// TestShippedDefaultConfig runs the hook as installed: no --config, so the
// built-in defaults (/dev/dxg, /usr/lib/wsl, /var/log/wsl-gpu-hook.log),
// with dxgsim putting the simulated host at those real paths inside a
// private mount namespace. The second case is how Docker's --gpus runs it.
func TestShippedDefaultConfig(t *testing.T) {
	env(t)
	shipped := "/etc/wsl-gpu-hook/config.toml"
	if _, err := os.Stat(shipped); err == nil {
		t.Skipf("%s exists on this host: the hook would read it instead of its defaults", shipped)
	}
	const logFile = "/var/log/wsl-gpu-hook.log"
	tests := []struct {
		name  string
		argv0 string
		env   []string
	}{
		{name: "wsl-gpu-hook prestart", env: []string{"WSL_GPU_DEVICES=all"}},
		{name: "as nvidia-container-runtime-hook", argv0: "nvidia-container-runtime-hook", env: []string{"NVIDIA_VISIBLE_DEVICES=all"}},
	}
	// Not parallel: both cases append to the one default log file.
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logBefore := fileSize(logFile)
			o := runBox(t, box{
				image: imageDebian,
				sim:   &simulation{profile: "nvidia-laptop", bindHost: true},
				hook:  hookDefault, argv0: tt.argv0, env: tt.env,
				checks: []check{
					{"dxg-open", "fsprobe open-rw /dev/dxg"},
					{"cudaprobe", "cudaprobe"},
					{"smi", "nvidia-smi"},
				},
			})
			o.started(t)
			wantOutput(t, o, "dxg-open", "open-rw /dev/dxg: ok")
			o.succeeds(t, "cudaprobe")
			o.succeeds(t, "smi")
			if fileSize(logFile) <= logBefore {
				t.Errorf("the hook wrote nothing to its default log %s", logFile)
			}
			// The default probe cache, /run/wsl-gpu-hook, as runBox
			// shows the hook a /run of this run's own.
			if kept, _ := filepath.Glob(filepath.Join(o.run, "wsl-gpu-hook", probecache.Glob)); len(kept) != 1 {
				t.Errorf("the hook kept %d probe caches in its default /run/wsl-gpu-hook, want 1: %q", len(kept), kept)
			}
		})
	}
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return -1
	}
	return fi.Size()
}

// hookLine is the one line a failing hook prints for users:
// `wsl-gpu-hook: <stage>: <cause>: <what to do>`.
var hookLine = regexp.MustCompile(`^wsl-gpu-hook: [^:]+: .+: .+$`)

// TestFailingStart: when the hook cannot give the container what it asked
// for, the container does not start, runc's error carries exactly the
// hook's one line, and nothing is left mounted (runBox checks the host).
func TestFailingStart(t *testing.T) {
	env(t)
	tests := []struct {
		name    string
		profile string
		request string
	}{
		{name: "no GPU on the host", profile: "no-gpu", request: "all"},
		{name: "no adapter of that vendor", profile: "nvidia-laptop", request: "amd"},
		{name: "index out of range", profile: "nvidia-laptop", request: "7"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o := runBox(t, box{
				image:  imageBusybox,
				sim:    &simulation{profile: tt.profile},
				hook:   hookConfig,
				env:    []string{"WSL_GPU_DEVICES=" + tt.request},
				checks: []check{{"ran", "echo the container ran"}},
			})
			if o.exitCode == 0 {
				t.Fatalf("the container started, want runc to fail\n%s", o.debug())
			}
			if len(o.checks) != 0 {
				t.Errorf("the container's process ran: %v", o.checks)
			}
			got, ok := hookStderr(o.stderr)
			if !ok {
				t.Fatalf("runc's error does not carry the hook's stderr:\n%s", o.stderr)
			}
			t.Logf("runc's error ends with: %s", strings.TrimSpace(got))
			line, rest, _ := strings.Cut(got, "\n")
			if rest != "" || !hookLine.MatchString(line) {
				t.Errorf("the hook's stderr is %q, want exactly one line `wsl-gpu-hook: <stage>: <cause>: <what to do>`", got)
			}
		})
	}
}

// hookStderr finds, in runc's error output, the hook's stderr that runc
// embeds (`... error running hook ...: stderr: <hook's stderr>`), with
// runc's logrus quoting undone.
func hookStderr(runcStderr string) (string, bool) {
	msg := runcStderr
	for _, line := range strings.Split(runcStderr, "\n") {
		if i := strings.Index(line, ` msg="`); i >= 0 && strings.Contains(line, "hook") {
			if m, err := strconv.Unquote(line[i+len(" msg="):]); err == nil {
				msg = m
				break
			}
		}
	}
	i := strings.LastIndex(msg, "stderr: ")
	if i < 0 {
		return "", false
	}
	return msg[i+len("stderr: "):], true
}

// TestWarmStartLeavesDxgClosed: with the GPU driver's devices listed in
// sysfs, a start whose probe cache is warm gives the container the same
// GPU without the hook opening /dev/dxg: dxgsim counts one process object
// fewer than the cold start's (the hook's, a host round trip each way on
// WSL), and none at all, nor any ioctl, when the container makes no dxg
// call either; the hook logs the cache hit, and inside the container
// /dev/dxg opens, libcuda loads with no LD_LIBRARY_PATH and CUDA
// initialises, the driver folder is read-only.
func TestWarmStartLeavesDxgClosed(t *testing.T) {
	env(t)
	t.Parallel()
	const profile = "nvidia-laptop"
	p, err := simhost.Lookup(profile)
	if err != nil {
		t.Fatal(err)
	}
	sysfs := filepath.Join(t.TempDir(), "sys")
	if err := fixture.SysfsDevices(sysfs, p, nil, nil); err != nil {
		t.Fatal(err)
	}
	nvDir := ctrDrivers + "/" + folder(t, profile, simhost.FolderNVIDIA).Folder
	cache, dev := t.TempDir(), t.TempDir()
	start := func(cuda bool) (*outcome, simReport) {
		checks := []check{
			{"dxg-open", "fsprobe open-rw /dev/dxg"},
			{"write-driver", "fsprobe create " + nvDir + "/e2e-write-test"},
		}
		if cuda {
			checks = append(checks, check{"cudaprobe", "cudaprobe"})
		}
		o := runBox(t, box{
			image: imageDebian, sim: &simulation{profile: profile}, hook: hookConfig,
			env: []string{"WSL_GPU_DEVICES=all"}, probeCache: cache, sysfs: sysfs, devDir: dev,
			checks: checks,
		})
		o.started(t)
		wantOutput(t, o, "dxg-open", "open-rw /dev/dxg: ok")
		wantContains(t, o, "write-driver", ": EROFS ")
		if cuda {
			wantContains(t, o, "cudaprobe", "cuInit(0) = 0")
		}
		var r simReport
		if err := json.Unmarshal([]byte(o.report), &r); err != nil {
			t.Fatalf("dxgsim report: %v\n%s", err, o.report)
		}
		return o, r
	}
	_, cold := start(true)
	warm, hit := start(true)
	if !strings.Contains(warm.hookLog, "host probe answered from the cache") {
		t.Errorf("the second start's hook did not answer from its probe cache:\n%s", warm.hookLog)
	}
	if hit.ProcessesCreated != cold.ProcessesCreated-1 {
		t.Errorf("dxg process objects: cold start %d, warm start %d; want one fewer (the hook's)", cold.ProcessesCreated, hit.ProcessesCreated)
	}
	// A third, whose container makes no dxg call either: dxgsim must have
	// seen none at all.
	if _, quiet := start(false); len(quiet.Calls) != 0 || quiet.ProcessesCreated != 0 {
		t.Errorf("a warm start made dxg calls %v and %d process objects, want none", quiet.Calls, quiet.ProcessesCreated)
	}
}

// simReport is the part of dxgsim's --report a test reads here.
type simReport struct {
	Calls            map[string]uint64 `json:"calls"`
	ProcessesCreated uint64            `json:"processesCreated"`
}
