package engines

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/testbin"
)

// The engine matrix: each engine and version users run (a column) by each
// way of asking for a GPU (a row), checked from inside the container. A
// column runs on this host (Debian 12's packages) or in a Debian 13 root
// the test pivots into, with engines from Debian 13's packages or built
// from their Go modules (hack/engines). Every engine runs under dxgsim with
// the simulated host at the real WSL paths (--bind-host), so the hook runs
// with its built-in paths as on WSL.

// world is where a column's engine runs.
type world struct {
	name string   // debian12, debian13
	root string   // Debian root pivoted into; "" runs on the host
	path []string // bin dirs put first on PATH (Go-module engines, extra names)
	// cgroup2 shows the root only the unified cgroup hierarchy: crun
	// refuses this host's hybrid layout (v1 controllers, hugetlb on v2).
	cgroup2 bool
	// setup is more shell run after the prelude, in the command's own
	// mount namespace (user-namespace columns bind id files there).
	setup string
}

// The worlds: this host, the Debian 13 root, that root with only the
// unified cgroup hierarchy.
func host(*testing.T, *matrix) world       { return world{name: "debian12"} }
func trixie(_ *testing.T, m *matrix) world { return world{name: "debian13", root: m.trixie} }
func trixieCgroup2(t *testing.T, m *matrix) world {
	w := trixie(t, m)
	w.cgroup2 = true
	return w
}

// named is a column setting that does not depend on the run.
func named(n string) func(*testing.T, *matrix) string {
	return func(*testing.T, *matrix) string { return n }
}

// matrix is what every matrix test shares, built once.
type matrix struct {
	e       *env
	pivot   string // test/pivotroot binary
	config  string // hook config with the built-in WSL paths
	log     string // the hook's log
	specs   string // dir of the CDI specs `cdi generate` wrote
	trixie  string // Debian 13 root
	mu      sync.Mutex
	engines map[string]string // Go-module engine -> bin dir
}

// engine returns the bin dir of a Go-module engine (runc, containerd,
// dockerd), building it on first use (hack/engines/build.sh caches it
// across runs; CI builds them before the tests).
func (m *matrix) engine(t *testing.T, name string) string {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	if dir, ok := m.engines[name]; ok {
		return dir
	}
	out, err := exec.Command("../../hack/engines/build.sh", name).Output()
	if err != nil {
		t.Fatalf("hack/engines/build.sh %s: %v\n%s", name, err, stderrOf(err))
	}
	m.engines[name] = strings.TrimSpace(string(out))
	return m.engines[name]
}

var (
	matrixOnce sync.Once
	shMatrix   *matrix
	matrixErr  error
)

// engineCache is where hack/engines puts roots and engines.
func engineCache() string {
	if c := os.Getenv("E2E_CACHE"); c != "" {
		return c
	}
	return "/var/cache/wsl-gpu-hook-e2e"
}

func setupMatrix(t *testing.T) *matrix {
	t.Helper()
	if testing.Short() {
		t.Skip("engine matrix: skipped under -short")
	}
	e := setup(t)
	matrixOnce.Do(func() { shMatrix, matrixErr = buildMatrix(e) })
	if matrixErr != nil {
		t.Fatal(matrixErr)
	}
	return shMatrix
}

func buildMatrix(e *env) (*matrix, error) {
	m := &matrix{e: e, config: filepath.Join(e.dir, "config-wsl.toml"),
		log: filepath.Join(e.dir, "hook-matrix.log"), engines: map[string]string{}}
	var err error
	if m.pivot, err = testbin.Build(e.dir, "pivotroot", "./test/pivotroot", false); err != nil {
		return nil, err
	}
	cfg := fmt.Sprintf("log_file = %q\nlog_level = \"debug\"\n", m.log)
	if err := os.WriteFile(m.config, []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	if err := m.generateSpecs(); err != nil {
		return nil, err
	}
	out, err := exec.Command("../../hack/engines/root.sh", "trixie").Output()
	if err != nil {
		return nil, fmt.Errorf("hack/engines/root.sh trixie: %v\n%s", err, stderrOf(err))
	}
	m.trixie = strings.TrimSpace(string(out))
	return m, nil
}

func stderrOf(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(ee.Stderr)
	}
	return ""
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// generateSpecs writes the CDI specs for the simulated host as a user
// does, with `wsl-gpu-hook install cdi` (into a prefix), and points m.specs
// at them.
func (m *matrix) generateSpecs() error {
	prefix := filepath.Join(m.e.dir, "cdi-prefix")
	cmd := exec.Command(m.e.sim, "--profile", profile, "--bind-host", m.e.hostDir, "--",
		m.e.hook, "install", "--prefix", prefix, "--hook", m.e.hook, "cdi")
	cmd.Env = append(os.Environ(), "WSL_GPU_HOOK_CONFIG="+m.config)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("install cdi: %v\n%s", err, out)
	}
	m.specs = filepath.Join(prefix, "etc/cdi")
	return nil
}

// prelude runs first in every matrix command: in the command's own mount
// namespace it gives the engine an empty /run (on the host; the Debian 13
// root has one already) and an empty /etc/cdi, then puts the generated
// CDI specs into /run/cdi, so no spec or state lands on the host and no
// other test's spec is seen.
const prelude = `set -e
[ -n "$IN_ROOT" ] || mount -t tmpfs tmpfs /run
[ ! -d /etc/cdi ] || mount -t tmpfs tmpfs /etc/cdi
mkdir -p /run/cdi
[ -z "$CDI_DIR" ] || cp "$CDI_DIR"/* /run/cdi/
`

// command builds the command that runs script under dxgsim in w, with
// extra environment; report, if set, receives dxgsim's summary.
func (m *matrix) command(t *testing.T, w world, report string, extraEnv []string, script string, args ...string) *exec.Cmd {
	t.Helper()
	a := []string{"--profile", profile, "--bind-host", m.e.hostDir}
	if report != "" {
		a = append(a, "--report", report)
	}
	a = append(a, "--")
	env := []string{"WSL_GPU_HOOK_CONFIG=" + m.config, "CDI_DIR=" + m.specs, "IN_ROOT="}
	if w.root != "" {
		scratch := shortTemp(t, "wgm-root-")
		a = append(a, m.pivot, "--root", w.root, "--scratch", scratch)
		if engines := filepath.Join(engineCache(), "engines"); isDir(engines) {
			a = append(a, "--bind", engines)
		}
		if w.cgroup2 {
			a = append(a, "--cgroup2")
		}
		a = append(a, "--")
		env[2] = "IN_ROOT=1"
	}
	a = append(append(a, "sh", "-c", prelude+w.setup+script, "sh"), args...)
	cmd := exec.Command(m.e.sim, a...)
	path := append(append([]string{}, w.path...), m.e.bin, "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
	cmd.Env = append(append(append(os.Environ(), "PATH="+strings.Join(path, ":")), env...), extraEnv...)
	return cmd
}

// runIn runs a one-shot engine command (podman) in w and returns its output.
func (m *matrix) runIn(t *testing.T, w world, args ...string) (string, error) {
	t.Helper()
	cmd := m.command(t, w, "", nil, `exec "$@"`, args...)
	return runBounded(cmd)
}

// startIn starts a daemon in w under dxgsim. Its client commands run in its
// mount namespace (exec), where its sockets, CDI specs and binaries are.
func (m *matrix) startIn(t *testing.T, w world, args ...string) *daemon {
	t.Helper()
	d := &daemon{report: filepath.Join(t.TempDir(), "dxgsim.json")}
	d.cmd = m.command(t, w, d.report, nil, `exec "$@"`, args...)
	d.cmd.Stdout, d.cmd.Stderr = &d.stderr, &d.stderr
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return d
}

// pid is the daemon's own pid: dxgsim's only child (the shim, pivotroot and
// sh each exec into the next). A Go parent may fork from any of its
// threads, and each thread lists its own children.
func (d *daemon) pid() (int, error) {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", d.cmd.Process.Pid))
	var kids []string
	for _, task := range tasks {
		if data, err := os.ReadFile(task); err == nil {
			kids = append(kids, strings.Fields(string(data))...)
		}
	}
	if len(kids) != 1 {
		return 0, fmt.Errorf("dxgsim has children %q, want one", kids)
	}
	return strconv.Atoi(kids[0])
}

// exec runs a client command in the daemon's mount namespace, with stdin.
func (d *daemon) exec(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	pid, err := d.pid()
	if err != nil {
		return "", fmt.Errorf("daemon not running: %w\n%s", err, d.stderr.String())
	}
	cmd := exec.Command("nsenter", append([]string{"--mount=/proc/" + strconv.Itoa(pid) + "/ns/mnt", "--"}, args...)...)
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root"}
	return runBoundedIn(cmd, stdin)
}

// runBoundedIn is runBounded with standard input from the file stdin, if
// it is not "".
func runBoundedIn(cmd *exec.Cmd, stdin string) (string, error) {
	if stdin != "" {
		f, err := os.Open(stdin)
		if err != nil {
			return "", err
		}
		defer f.Close()
		cmd.Stdin = f
	}
	return runBounded(cmd)
}

// hostClean fails the test if a WSL mount, a pivoted root's mount or a
// CDI spec of ours leaked onto the host.
func (m *matrix) hostClean(t *testing.T, mountsBefore string) {
	t.Helper()
	if after := hostWSLMounts(t); after != mountsBefore {
		t.Errorf("WSL mounts leaked into the host:\n%s", after)
	}
	data, _ := os.ReadFile("/proc/1/mountinfo")
	if l := grepLines(string(data), m.e.dir); l != "" {
		t.Errorf("mounts of the test's scratch dir leaked into the host:\n%s", l)
	}
	if _, err := os.Lstat("/run/podman-test"); err == nil {
		t.Errorf("/run/podman-test appeared on the host")
	}
	// Our specs name this run's hook, under m.e.dir.
	specs, _ := filepath.Glob("/run/cdi/*")
	etc, _ := filepath.Glob("/etc/cdi/*")
	for _, p := range append(specs, etc...) {
		if data, err := os.ReadFile(p); err == nil && bytes.Contains(data, []byte(m.e.dir)) {
			t.Errorf("this run's CDI spec %s appeared on the host", p)
		}
	}
}

// gpuRow is one request form and what the container must get for it.
type gpuRow struct {
	name    string
	args    []string
	folders func(e *env) []string
}

func nvidiaOnly(e *env) []string { return []string{e.nvidia} }
func intelOnly(e *env) []string  { return []string{e.intel} }
func allGPUs(e *env) []string    { return []string{e.intel, e.nvidia} }

// checkRow runs the GPU check on out, with the row's folders.
func checkRow(t *testing.T, e *env, out string, folders []string) {
	t.Helper()
	cuda := false
	for _, f := range folders {
		cuda = cuda || f == e.nvidia
	}
	checkGPU(t, out, cuda, folders...)
}

// hookLogTail is the end of the matrix hook's log, for failure messages.
func (m *matrix) hookLogTail() string {
	log, _ := os.ReadFile(m.log)
	return tail(string(log), 4)
}

// shortTemp is a scratch dir removed after the test. Not t.TempDir: a
// subtest's name may hold commas, which overlay mount options cannot
// carry, and daemons' socket paths must stay short.
func shortTemp(t *testing.T, prefix string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// conmon starts `podman container cleanup --root DIR/...` when a
		// container exits; it may still run, and recreate files, after
		// podman run returned: wait for every process naming dir.
		for i := 0; processNaming(dir) && i < 60; i++ {
			time.Sleep(500 * time.Millisecond)
		}
		for i := 0; os.RemoveAll(dir) != nil && i < 20; i++ {
			time.Sleep(500 * time.Millisecond)
		}
		if _, err := os.Stat(dir); err == nil {
			t.Errorf("cannot remove %s", dir)
		}
	})
	return dir
}

// processNaming reports whether a running process has s in its command line.
func processNaming(s string) bool {
	cmdlines, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, c := range cmdlines {
		if data, err := os.ReadFile(c); err == nil && bytes.Contains(data, []byte(s)) {
			return true
		}
	}
	return false
}

// runBounded runs cmd with its output combined and a three-minute bound:
// an engine command that hangs must fail its cell, not the whole run.
func runBounded(cmd *exec.Cmd) (string, error) {
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return "", err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return out.String(), err
	case <-time.After(3 * time.Minute):
		cmd.Process.Kill()
		<-done
		return out.String(), fmt.Errorf("timed out after 3m")
	}
}
