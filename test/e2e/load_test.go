package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// TestLoad starts many containers through runc with the hook, many at once,
// all under one dxgsim so every adapter handle of every hook is counted:
// no start may fail, no mount may be left in the host's namespace, no
// handle may stay open, and concurrent hooks must write whole log lines.
// E2E_LOAD_N (default 1000) and E2E_LOAD_PARALLEL (default 50) size it.
//
// Leaks are counted per process, by dxgsim: it reports (and exits 3 for)
// every hook process that exits with adapter handles it never closed. A
// count of the system's open files could not see that: the kernel closes a
// leaked descriptor when the hook exits. Descriptors inside one Apply are
// counted by pkg/start/mounts' tests.
func TestLoad(t *testing.T) {
	h := env(t)
	n, par := envInt("E2E_LOAD_N", 1000), envInt("E2E_LOAD_PARALLEL", 50)
	hookBin := need(t, "build wsl-gpu-hook", h.hook)
	sim := need(t, "build dxgsim", h.dxgsim)
	fixture := h.needFixture(t, "nvidia-laptop")
	image := need(t, "image busybox", h.images[imageBusybox])

	dir, err := os.MkdirTemp(h.tmp, "load-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeWorkDir(t, dir) })
	// One root file system for all: busybox has no glibc loader, so the
	// hooks only create mount points in it, which they may race on.
	rootfs := filepath.Join(dir, "rootfs")
	if err := extractImage(image, rootfs); err != nil {
		t.Fatal(err)
	}
	devDir := filepath.Join(dir, "dev")
	os.MkdirAll(devDir, 0o755)
	cfg, logFile := filepath.Join(dir, "hook.toml"), filepath.Join(dir, "hook.log")
	writeHookConfig(t, cfg, filepath.Join(devDir, "dxg"), fixture, logFile)

	tmpl, err := h.runcSpec()
	if err != nil {
		t.Fatal(err)
	}
	var spec specs.Spec
	if err := json.Unmarshal(tmpl, &spec); err != nil {
		t.Fatal(err)
	}
	spec.Root = &specs.Root{Path: rootfs}
	spec.Process.Terminal = false
	spec.Process.Args = []string{"sh", "-c", ": <> /dev/dxg && test -d /usr/lib/wsl/drivers/nvltwi.inf_amd64_7b2a5c1c4e6f8d90"}
	spec.Process.Env = append(spec.Process.Env, "WSL_GPU_DEVICES=all")
	spec.Hooks = &specs.Hooks{Prestart: []specs.Hook{{Path: hookBin, Args: []string{"wsl-gpu-hook", "--config", cfg, "prestart"}}}}
	spec.Hostname = ""
	for i := 0; i < n; i++ {
		b := filepath.Join(dir, "bundles", strconv.Itoa(i))
		os.MkdirAll(b, 0o755)
		// Without a cgroupsPath runc uses /<id>: a second load run on the
		// machine (another checkout's tests) would share load-N's cgroups.
		spec.Linux.CgroupsPath = fmt.Sprintf("/%s/%s-%d", cgroupParent, filepath.Base(dir), i)
		data, _ := json.Marshal(spec)
		if err := os.WriteFile(filepath.Join(b, "config.json"), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	fails := filepath.Join(dir, "fails")
	script := fmt.Sprintf(`seq 0 %d | xargs -P %d -I{} sh -c 'runc --root %s/state run --bundle %s/bundles/{} load-{} >/dev/null 2>>%s/runc.err || echo {} >> %s'`,
		n-1, par, dir, dir, dir, fails)
	report := filepath.Join(dir, "report.json")
	before := snapshotHost(t, fixture, dir)
	cmd := exec.Command(sim, "--profile", "nvidia-laptop", "--dev", filepath.Join(devDir, "dxg"), "--report", report, "--", "sh", "-c", script)
	out, err := cmd.CombinedOutput()
	before.checkHost(t, fixture)
	if err != nil {
		t.Errorf("dxgsim: %v\n%s", err, tailLines(string(out), 20))
	}
	if data, err := os.ReadFile(fails); err == nil {
		errs, _ := os.ReadFile(filepath.Join(dir, "runc.err"))
		t.Errorf("%d of %d container starts failed; runc said:\n%s", len(strings.Fields(string(data))), n, tailLines(runcErrors(string(errs)), 10))
	}

	var r struct {
		ExitStatus    int `json:"exitStatus"`
		HandlesOpened int `json:"handlesOpened"`
		HandlesClosed int `json:"handlesClosed"`
		// Released: freed by the close of the process's last dxg fd,
		// as the hook leaves them (dxcore.Options.CloseHandlesWithFD).
		HandlesReleased int      `json:"handlesReleased"`
		HandlesOpen     int      `json:"handlesOpen"`
		Misuse          []string `json:"misuse"`
		MisuseTotal     int      `json:"misuseTotal"`
	}
	data, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	if r.HandlesOpen != 0 || r.HandlesOpened != r.HandlesClosed+r.HandlesReleased || r.HandlesOpened < 2*n || r.MisuseTotal > 0 {
		t.Errorf("adapter handles: opened %d closed %d released %d open %d (want >= %d, all closed or released with the fd); %d hook processes misused the device: %v",
			r.HandlesOpened, r.HandlesClosed, r.HandlesReleased, r.HandlesOpen, 2*n, r.MisuseTotal, r.Misuse)
	}
	if code := cmd.ProcessState.ExitCode(); code != r.ExitStatus {
		t.Errorf("dxgsim exited %d, the command %d: dxgsim found misuse", code, r.ExitStatus)
	}

	// Every log line whole: O_APPEND writes of one entry each.
	logData, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile(`^time="[^"]+" level=(debug|info|warning|error) msg=".*"( [a-z]+=\S+)*$`)
	ready := 0
	for i, l := range strings.Split(strings.TrimSuffix(string(logData), "\n"), "\n") {
		if !line.MatchString(l) {
			t.Fatalf("log line %d is torn or interleaved: %q", i+1, l)
		}
		if strings.Contains(l, `msg="GPU ready in `) {
			ready++
		}
	}
	if ready != n {
		t.Errorf("%d hooks logged GPU ready, want %d", ready, n)
	}
	t.Logf("%d containers, %d at a time: %d handles opened and closed, %d log lines", n, par, r.HandlesOpened, strings.Count(string(logData), "\n"))
}

// runcErrors drops runc's cgroup clean-up complaints, which it logs for
// containers that started fine, so the reason a start failed shows.
func runcErrors(stderr string) string {
	var keep []string
	for _, l := range strings.Split(stderr, "\n") {
		if !strings.Contains(l, "Failed to remove") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func tailLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}
