package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/fixture"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/simhost"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/testbin"
)

// suite is what TestMain prepared. It is assigned once, before m.Run, and
// only read afterwards; everything expensive in it is built lazily, once,
// by the first test that needs it (sync.OnceValues), so `-run` of one test
// builds only what that test uses.
var suite *harness

// harness holds the per-run scratch directory and the lazily built
// artifacts every test shares.
type harness struct {
	skip  string // why every test skips; "" when this host can run them
	repo  string // module root
	tmp   string // per-run scratch directory, removed after the run
	cache string // cache that outlives the run ($E2E_CACHE)
	keep  string // E2E_KEEP: "1" keeps every container's work dir, "failed" those of failed tests

	hook     func() (string, error) // static wsl-gpu-hook binary
	dxgsim   func() (string, error) // simulator binary
	stepkill func() (string, error) // test/stepkill, static
	probes   func() (probeSet, error)
	runcSpec func() ([]byte, error) // `runc spec` output, the bundle template
	images   map[string]func() (string, error)
	fixtures map[string]func() (string, error) // by simhost profile name
}

// probeSet is the test programs copied into every root file system.
type probeSet struct {
	cudaprobe string // dynamic, glibc: dlopen("libcuda.so.1") + cuInit
	fsprobe   string // static: open a path read-write or create a file
	rocprobe  string // dynamic, glibc: load librocdxg as ROCm's HSA runtime does
	// d3d12probe: dynamic, glibc: load libdxcore and libd3d12 as Mesa does
	d3d12probe string
}

// Image names, the keys of harness.images.
const (
	imageDebian  = "debian"
	imageBusybox = "busybox"
)

func TestMain(m *testing.M) {
	h, err := newHarness()
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		os.Exit(1)
	}
	suite = h
	code := m.Run()
	if h.tmp != "" && h.keep == "" {
		os.RemoveAll(h.tmp)
	}
	removeCgroupParents()
	os.Exit(code)
}

// cgroupParent holds every test container's cgroup (spec cgroupsPath).
const cgroupParent = "wsl-gpu-hook-e2e"

// removeCgroupParents removes the parent cgroup runc created in each
// hierarchy; runc removes only the containers' own. One still in use (a
// concurrent run) is busy and stays.
func removeCgroupParents() {
	dirs, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup/*", cgroupParent))
	if d := filepath.Join("/sys/fs/cgroup", cgroupParent); isDir(d) {
		dirs = append(dirs, d) // cgroup v2, unified at the root
	}
	for _, d := range dirs {
		os.Remove(d)
	}
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

func newHarness() (*harness, error) {
	h := &harness{keep: os.Getenv("E2E_KEEP")}
	if os.Geteuid() != 0 {
		h.skip = "end-to-end tests run containers with runc: run them as root"
		return h, nil
	}
	for _, tool := range []string{"runc", "gcc", "tar", "chroot"} {
		if _, err := exec.LookPath(tool); err != nil {
			h.skip = fmt.Sprintf("%s is not installed: install it (hack/setup.sh does) to run the end-to-end tests", tool)
			return h, nil
		}
	}
	repo, err := testbin.Root()
	if err != nil {
		return nil, err
	}
	h.repo = repo
	h.cache = os.Getenv("E2E_CACHE")
	if h.cache == "" {
		h.cache = "/var/cache/wsl-gpu-hook-e2e"
	}
	if err := os.MkdirAll(h.cache, 0o755); err != nil {
		return nil, fmt.Errorf("create cache dir: %w", err)
	}
	h.tmp, err = os.MkdirTemp("", scratchPrefix)
	if err != nil {
		return nil, fmt.Errorf("create scratch dir: %w", err)
	}
	bin := filepath.Join(h.tmp, "bin")
	h.hook = sync.OnceValues(func() (string, error) {
		return testbin.Hook(bin)
	})
	h.dxgsim = sync.OnceValues(func() (string, error) {
		return testbin.Dxgsim(bin)
	})
	h.stepkill = sync.OnceValues(func() (string, error) {
		return testbin.Stepkill(bin)
	})
	h.probes = sync.OnceValues(func() (probeSet, error) {
		return buildProbes(filepath.Join(h.repo, "test/e2e/testdata"), filepath.Join(h.repo, "hack"), bin)
	})
	h.runcSpec = sync.OnceValues(func() ([]byte, error) {
		return runcSpecTemplate(filepath.Join(h.tmp, "spec"))
	})
	h.images = map[string]func() (string, error){
		imageDebian:  sync.OnceValues(func() (string, error) { return debianImage(h.cache) }),
		imageBusybox: sync.OnceValues(func() (string, error) { return busyboxImage(h.cache) }),
	}
	h.fixtures = map[string]func() (string, error){}
	for _, name := range simhost.Names() {
		h.fixtures[name] = sync.OnceValues(func() (string, error) {
			p, err := simhost.Lookup(name)
			if err != nil {
				return "", err
			}
			dir := filepath.Join(h.tmp, "fixtures", name)
			// The e2e tests run as root: the tree gets its /dev/dri nodes.
			if err := fixture.Build(dir, p, fixture.Options{CacheDir: filepath.Join(h.cache, "fixture"), DeviceNodes: true}); err != nil {
				return "", fmt.Errorf("build fixture %s: %w", name, err)
			}
			return dir, nil
		})
	}
	return h, nil
}

// env returns the harness, or skips the test saying why it cannot run here.
func env(t *testing.T) *harness {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end test: skipped under -short")
	}
	if suite.skip != "" {
		t.Skip(suite.skip)
	}
	return suite
}

// need returns a lazily built artifact or fails the test with why it could
// not be built (a piece of the project that does not build is a failure,
// not a reason to skip).
func need(t *testing.T, what string, build func() (string, error)) string {
	t.Helper()
	p, err := build()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return p
}

func (h *harness) needProbes(t *testing.T) probeSet {
	t.Helper()
	p, err := h.probes()
	if err != nil {
		t.Fatalf("probes: %v", err)
	}
	return p
}

func (h *harness) needFixture(t *testing.T, profile string) string {
	t.Helper()
	build, ok := h.fixtures[profile]
	if !ok {
		t.Fatalf("no simhost profile %q", profile)
	}
	return need(t, "fixture "+profile, build)
}

func buildProbes(src, hack, dir string) (probeSet, error) {
	p := probeSet{cudaprobe: filepath.Join(dir, "cudaprobe"), fsprobe: filepath.Join(dir, "fsprobe"), rocprobe: filepath.Join(dir, "rocprobe"), d3d12probe: filepath.Join(dir, "d3d12probe")}
	builds := [][]string{
		{"-O2", "-Wall", "-o", p.cudaprobe, filepath.Join(src, "cudaprobe.c"), "-ldl"},
		{"-static", "-O2", "-Wall", "-o", p.fsprobe, filepath.Join(src, "fsprobe.c")},
		{"-O2", "-Wall", "-o", p.rocprobe, filepath.Join(hack, "rocprobe.c"), "-ldl"},
		{"-O2", "-Wall", "-o", p.d3d12probe, filepath.Join(src, "d3d12probe.c"), "-ldl"},
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return p, fmt.Errorf("create %s: %w", dir, err)
	}
	for _, args := range builds {
		if out, err := exec.Command("gcc", args...).CombinedOutput(); err != nil {
			return p, fmt.Errorf("gcc %s: %w\n%s", strings.Join(args, " "), err, out)
		}
	}
	return p, nil
}

// runcSpecTemplate returns the config.json `runc spec` writes: the bundle
// builder starts from the runtime's own defaults (mounts, masked paths).
func runcSpecTemplate(dir string) ([]byte, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", dir, err)
	}
	var stderr bytes.Buffer
	cmd := exec.Command("runc", "spec", "--bundle", dir)
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("runc spec: %w: %s", err, stderr.String())
	}
	return os.ReadFile(filepath.Join(dir, "config.json"))
}
