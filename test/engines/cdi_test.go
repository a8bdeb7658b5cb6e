package engines

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/fixture"
)

// mountsInside lists the container's WSL mount points, one line each:
// a folder mounted twice shows twice.
const mountsInside = `awk '$5 ~ "^/usr/lib/wsl" {print "mnt " $5}' /proc/self/mountinfo`

// cdiHost is a private copy of the simulated host tree, so a test may
// rename its NVIDIA folder as a driver update does, and a config for it.
type cdiHost struct {
	dir, config, drivers string
}

func newCDIHost(t *testing.T, e *env) *cdiHost {
	t.Helper()
	h := &cdiHost{dir: filepath.Join(t.TempDir(), "host")}
	if out, err := exec.Command("cp", "-a", e.hostDir, h.dir).CombinedOutput(); err != nil {
		t.Fatalf("copy host tree: %v %s", err, out)
	}
	h.drivers = filepath.Join(h.dir, fixture.DriversDir)
	h.config = filepath.Join(filepath.Dir(h.dir), "config.toml")
	cfg := fixture.Config{Dxg: e.dev, Host: h.dir, LogFile: filepath.Join(e.dir, "hook.log"), LogLevel: "debug"}
	if err := cfg.Write(h.config); err != nil {
		t.Fatal(err)
	}
	return h
}

// installCDI runs `wsl-gpu-hook install cdi` on the simulated host into
// prefix and returns the spec dir it wrote.
func installCDI(t *testing.T, e *env, h *cdiHost, prefix string, extra ...string) string {
	t.Helper()
	args := append([]string{"--profile", profile, "--dev", e.dev, "--", e.hook, "install", "--prefix", prefix, "--hook", e.hook}, extra...)
	args = append(args, "cdi")
	out, err := run(t, []string{"WSL_GPU_HOOK_CONFIG=" + h.config}, e.sim, args...)
	if err != nil {
		t.Fatalf("install cdi: %v\n%s", err, out)
	}
	return filepath.Join(prefix, "etc/cdi")
}

// podmanCDI runs podman as TestPodman does, with every spec of specDir in
// /run/cdi and extra dxgsim arguments (a renamed folder).
func podmanCDI(t *testing.T, e *env, dir, specDir string, sim []string, args ...string) (string, error) {
	t.Helper()
	script := `set -e
mount -t tmpfs tmpfs /run
mkdir -p /run/cdi
cp "$CDI_DIR"/* /run/cdi/
exec podman "$@"`
	base := []string{
		"--root", filepath.Join(dir, "storage"), "--runroot", "/run/podman-test",
		"--runtime", "runc", "--cgroup-manager", "cgroupfs", "--events-backend", "none",
		"--hooks-dir", filepath.Join(dir, "hooks.d"),
	}
	simArgs := append(append([]string{"--profile", profile, "--dev", e.dev}, sim...),
		"--", "unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh")
	all := append(append(simArgs, base...), args...)
	return run(t, []string{"PATH=" + e.bin + ":" + os.Getenv("PATH"), "CDI_DIR=" + specDir}, e.sim, all...)
}

// mountPoints returns the "mnt" lines of mountsInside, sorted.
func mountPoints(out string) []string {
	var got []string
	for _, l := range strings.Split(out, "\n") {
		if m, ok := strings.CutPrefix(l, "mnt "); ok {
			got = append(got, m)
		}
	}
	sort.Strings(got)
	return got
}

func readDir(t *testing.T, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, en := range entries {
		data, err := os.ReadFile(filepath.Join(dir, en.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[en.Name()] = string(data)
	}
	return out
}

// TestCDIStale is the driver update: a container starts with
// --device nvidia.com/gpu=all; Windows replaces the NVIDIA driver (new
// folder hash, which the host then reports); without `cdi generate` the
// next container starts, works and gets the new folder.
func TestCDIStale(t *testing.T) {
	e := setup(t)
	if _, err := exec.LookPath("podman"); err != nil {
		t.Skip("podman not installed")
	}
	h := newCDIHost(t, e)
	dir := scratchDir(t)
	os.MkdirAll(filepath.Join(dir, "hooks.d"), 0o755)
	specDir := installCDI(t, e, h, filepath.Join(dir, "prefix"))
	specs := readDir(t, specDir)
	if len(specs) != 2 {
		t.Fatalf("install cdi wrote %d specs, want nvidia.com/gpu and wsl-gpu-hook.dev/gpu: %v", len(specs), specs)
	}
	for name, data := range specs {
		if strings.Contains(data, e.nvidia) || strings.Contains(data, e.intel) {
			t.Errorf("%s names a driver store folder:\n%s", name, data)
		}
	}

	start := func(t *testing.T, sim []string, folder string) {
		t.Helper()
		rootfs := filepath.Join(t.TempDir(), "rootfs")
		if out, err := exec.Command("cp", "-a", e.rootfs, rootfs).CombinedOutput(); err != nil {
			t.Fatalf("copy rootfs: %v %s", err, out)
		}
		out, err := podmanCDI(t, e, dir, specDir, sim, "run", "--rm", "--network", "none",
			"--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024",
			"--device", "nvidia.com/gpu=all", "--rootfs", rootfs, "sh", "-c", inside)
		if err != nil {
			log, _ := os.ReadFile(filepath.Join(e.dir, "hook.log"))
			t.Fatalf("podman: %v\n%s\nhook log:\n%s", err, out, tail(string(log), 10))
		}
		checkGPU(t, out, true, folder)
	}
	mountsBefore := hostWSLMounts(t)
	start(t, nil, e.nvidia)

	// The driver update: the folder's hash changes, and the host reports
	// the new path for the NVIDIA adapter (index 1 on this laptop).
	updated := "nvltwi.inf_amd64_00c0ffee00c0ffee"
	if err := os.Rename(filepath.Join(h.drivers, e.nvidia), filepath.Join(h.drivers, updated)); err != nil {
		t.Fatal(err)
	}
	start(t, []string{"--folder", "1=" + updated}, updated)

	if after := readDir(t, specDir); fmt.Sprint(after) != fmt.Sprint(specs) {
		t.Errorf("the specs changed:\n%v", after)
	}

	// What does need `cdi generate`: the set of adapters changed (here
	// the host reports the Intel NPU machine, with no NVIDIA GPU). The
	// start fails with one line that says so.
	rootfs := filepath.Join(t.TempDir(), "rootfs")
	if out, err := exec.Command("cp", "-a", e.rootfs, rootfs).CombinedOutput(); err != nil {
		t.Fatalf("copy rootfs: %v %s", err, out)
	}
	out, err := podmanCDI(t, e, dir, specDir, []string{"--profile", "intel-npu"}, "run", "--rm", "--network", "none",
		"--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024",
		"--device", "nvidia.com/gpu=all", "--rootfs", rootfs, "sh", "-c", inside)
	line := grepLines(out, "wsl-gpu-hook: ")
	if err == nil || strings.Count(line, "wsl-gpu-hook: ") != 1 ||
		!strings.Contains(line, "wsl-gpu-hook: cdi-hook: CDI device selection vendor:nvidia matches no adapter on this host") ||
		!strings.Contains(line, "run wsl-gpu-hook cdi generate") {
		t.Errorf("start without the NVIDIA GPU: %v, want one hook line saying to regenerate:\n%s", err, out)
	}
	if after := hostWSLMounts(t); after != mountsBefore {
		t.Errorf("WSL mounts leaked into the host:\n%s", after)
	}
}

// TestCDIDevices asks for devices by the names engines produce and checks
// from inside what each got, each folder mounted once even when two spec
// files' hooks (and a hooks.d prestart hook) all run.
func TestCDIDevices(t *testing.T) {
	e := setup(t)
	if _, err := exec.LookPath("podman"); err != nil {
		t.Skip("podman not installed")
	}
	h := newCDIHost(t, e)
	dir := scratchDir(t)
	hooksDir := filepath.Join(dir, "hooks.d")
	os.MkdirAll(hooksDir, 0o755)
	if err := os.WriteFile(filepath.Join(hooksDir, "wsl-gpu-hook.json"), shippedHooksFile(t, e.hook, h.config), 0o644); err != nil {
		t.Fatal(err)
	}
	specDir := installCDI(t, e, h, filepath.Join(dir, "prefix"))
	lib := "/usr/lib/wsl/lib"
	drv := func(f string) string { return "/usr/lib/wsl/drivers/" + f }
	mountsBefore := hostWSLMounts(t)
	tests := []struct {
		name    string
		args    []string
		folders []string
	}{
		{name: "nvidia.com/gpu=0", args: []string{"--device", "nvidia.com/gpu=0"}, folders: []string{e.nvidia}},
		{name: "wsl-gpu-hook.dev/gpu=intel", args: []string{"--device", "wsl-gpu-hook.dev/gpu=intel"}, folders: []string{e.intel}},
		{name: "wsl-gpu-hook.dev/gpu=1 (host index)", args: []string{"--device", "wsl-gpu-hook.dev/gpu=1"}, folders: []string{e.nvidia}},
		{name: "two kinds, overlapping", args: []string{"--device", "nvidia.com/gpu=0", "--device", "wsl-gpu-hook.dev/gpu=all"},
			folders: []string{e.intel, e.nvidia}},
		// The prestart hook sees the node and the lib dir from CDI and
		// stands down (gpuplan.Skip): the CDI device decides.
		{name: "hooks.d prestart and CDI", args: []string{"--annotation", "wsl-gpu-hook/devices=all", "--device", "nvidia.com/gpu=all"},
			folders: []string{e.nvidia}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rootfs := filepath.Join(t.TempDir(), "rootfs")
			if out, err := exec.Command("cp", "-a", e.rootfs, rootfs).CombinedOutput(); err != nil {
				t.Fatalf("copy rootfs: %v %s", err, out)
			}
			args := append([]string{"run", "--rm", "--network", "none", "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024"}, tt.args...)
			args = append(args, "--rootfs", rootfs, "sh", "-c", inside+mountsInside)
			out, err := podmanCDI(t, e, dir, specDir, nil, args...)
			if err != nil {
				log, _ := os.ReadFile(filepath.Join(e.dir, "hook.log"))
				t.Fatalf("podman: %v\n%s\nhook log:\n%s", err, out, tail(string(log), 10))
			}
			checkGPU(t, out, strings.Contains(strings.Join(tt.folders, ","), e.nvidia), tt.folders...)
			want := []string{lib}
			for _, f := range tt.folders {
				want = append(want, drv(f))
			}
			sort.Strings(want)
			if got := mountPoints(out); strings.Join(got, " ") != strings.Join(want, " ") {
				t.Errorf("mount points in the container:\n got %v\nwant %v (each once)", got, want)
			}
		})
	}
	if after := hostWSLMounts(t); after != mountsBefore {
		t.Errorf("WSL mounts leaked into the host:\n%s", after)
	}
}

// TestCDIRootless: podman as an ordinary user with the specs `install cdi
// --user` writes. The hook runs in podman's user namespace and the
// container's device cgroup, enumerates and mounts the folders itself.
func TestCDIRootless(t *testing.T) {
	e := setup(t)
	r := newRootless(t, e)
	if err := os.MkdirAll(r.hooksDir, 0o755); err != nil {
		t.Fatal(err)
	}
	// As on a WSL host: the simulated host at the real paths, default
	// config; install for the user writes to $XDG_CONFIG_HOME/cdi.
	cfgHome := filepath.Join(r.home, "config")
	out, err := run(t, []string{"HOME=" + r.home, "XDG_CONFIG_HOME=" + cfgHome, "XDG_RUNTIME_DIR=" + filepath.Join(r.home, "run")},
		e.sim, "--profile", profile, "--bind-host", e.hostDir, "--", e.hook, "install", "--user", "--hook", e.hook, "cdi")
	if err != nil {
		t.Fatalf("install cdi --user: %v\n%s", err, out)
	}
	specDir := filepath.Join(cfgHome, "cdi")
	if n := len(readDir(t, specDir)); n != 2 {
		t.Fatalf("install cdi --user wrote %d specs in %s", n, specDir)
	}
	if _, err := os.Stat(filepath.Join(cfgHome, "systemd/user/wsl-gpu-hook-cdi.service")); err != nil {
		t.Errorf("no user unit: %v", err)
	}
	// Podman reads /etc/cdi and /var/run/cdi, rootless too; containers.conf
	// cdi_spec_dirs adds the user's dir where podman has it.
	mountsBefore := hostWSLMounts(t)
	for _, tt := range []struct {
		device  string
		folders []string
	}{
		{"nvidia.com/gpu=all", []string{e.nvidia}},
		{"wsl-gpu-hook.dev/gpu=all", []string{e.intel, e.nvidia}},
	} {
		t.Run(tt.device, func(t *testing.T) {
			out, err := r.podmanSpecs(t, specDir, "run", "--rm", "--network", "none", "--device", tt.device,
				"--rootfs", r.rootfs(t), "sh", "-c", inside+mountsInside)
			if err != nil {
				t.Fatalf("podman: %v\n%s", err, out)
			}
			checkGPU(t, out, true, tt.folders...)
		})
	}
	if after := hostWSLMounts(t); after != mountsBefore {
		t.Errorf("WSL mounts leaked into the host:\n%s", after)
	}
}

// podmanSpecs is rootless.podman with every spec of specDir in /run/cdi.
func (r *rootless) podmanSpecs(t *testing.T, specDir string, args ...string) (string, error) {
	t.Helper()
	script := `set -e
mount -t tmpfs tmpfs /run
mkdir -p /run/cdi
cp "$CDI_DIR"/*.json /run/cdi/
exec setpriv --reuid "$RUID" --regid "$RUID" --init-groups env HOME="$RHOME" XDG_RUNTIME_DIR="$RHOME/run" XDG_CONFIG_HOME="$RHOME/config" podman "$@"`
	base := []string{
		"--root", filepath.Join(r.home, "storage"), "--runroot", filepath.Join(r.home, "runroot"),
		"--runtime", "runc", "--cgroup-manager", "cgroupfs", "--events-backend", "none",
		"--hooks-dir", r.hooksDir,
	}
	simArgs := []string{"--profile", profile, "--bind-host", r.e.hostDir, "--", "unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh"}
	env := []string{"PATH=" + r.e.bin + ":" + os.Getenv("PATH"), "CDI_DIR=" + specDir, "RUID=" + rootlessUser, "RHOME=" + r.home}
	out, err := run(t, env, r.e.sim, append(append(simArgs, base...), args...)...)
	r.stopPause()
	return out, err
}

// nvidiaSpec is the shape of NVIDIA's WSL spec (nvidia-ctk cdi generate
// --mode=wsl), trimmed: nvidia.com/gpu=all with the folder's files.
func nvidiaSpec(drivers, folder, dev string) string {
	return fmt.Sprintf(`cdiVersion: 0.5.0
kind: nvidia.com/gpu
devices:
- name: all
  containerEdits:
    deviceNodes:
    - path: /dev/dxg
      hostPath: %[3]s
containerEdits:
  mounts:
  - hostPath: %[1]s/%[2]s/libcuda.so.1.1
    containerPath: /usr/lib/wsl/drivers/%[2]s/libcuda.so.1.1
    options: [ro, nosuid, nodev, bind]
`, drivers, folder, dev)
}

// TestCDIConflict: NVIDIA's toolkit already wrote nvidia.com/gpu. Podman
// refuses the name when both specs are there; install cdi says so, what
// each choice means, and changes nothing until told; with
// --nvidia-kind=ours podman resolves nvidia.com/gpu to ours.
func TestCDIConflict(t *testing.T) {
	e := setup(t)
	if _, err := exec.LookPath("podman"); err != nil {
		t.Skip("podman not installed")
	}
	h := newCDIHost(t, e)
	dir := scratchDir(t)
	os.MkdirAll(filepath.Join(dir, "hooks.d"), 0o755)
	prefix := filepath.Join(dir, "prefix")
	specDir := filepath.Join(prefix, "etc/cdi")
	if err := os.MkdirAll(specDir, 0o755); err != nil {
		t.Fatal(err)
	}
	theirs := nvidiaSpec(h.drivers, e.nvidia, e.dev)
	if err := os.WriteFile(filepath.Join(specDir, "nvidia.yaml"), []byte(theirs), 0o644); err != nil {
		t.Fatal(err)
	}
	startNVIDIA := func(t *testing.T, specDir string) (string, error) {
		rootfs := filepath.Join(t.TempDir(), "rootfs")
		if out, err := exec.Command("cp", "-a", e.rootfs, rootfs).CombinedOutput(); err != nil {
			t.Fatalf("copy rootfs: %v %s", err, out)
		}
		return podmanCDI(t, e, dir, specDir, nil, "run", "--rm", "--network", "none",
			"--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024",
			"--device", "nvidia.com/gpu=all", "--rootfs", rootfs, "sh", "-c", inside)
	}

	// What the user would get if install wrote ours next to NVIDIA's:
	// the engine refuses the name.
	both := t.TempDir()
	os.WriteFile(filepath.Join(both, "nvidia.yaml"), []byte(theirs), 0o644)
	other := t.TempDir()
	installCDI(t, e, h, other, "--nvidia-kind=ours")
	data, err := os.ReadFile(filepath.Join(other, "etc/cdi/nvidia.com-gpu_wsl-gpu-hook.json"))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(both, "nvidia.com-gpu_wsl-gpu-hook.json"), data, 0o644)
	if out, err := startNVIDIA(t, both); err == nil || !strings.Contains(out, "nvidia.com/gpu=all") {
		t.Fatalf("podman with two specs defining nvidia.com/gpu=all: %v\n%s", err, out)
	}

	// install cdi without a choice: one line, the choices, nothing written.
	before := readDir(t, specDir)
	args := []string{"--profile", profile, "--dev", e.dev, "--", e.hook, "install", "--prefix", prefix, "--hook", e.hook, "cdi"}
	out, err := run(t, []string{"WSL_GPU_HOOK_CONFIG=" + h.config}, e.sim, args...)
	if err == nil || !strings.Contains(out, "wsl-gpu-hook: install cdi: nvidia.com/gpu already defined by /etc/cdi/nvidia.yaml") ||
		!strings.Contains(out, "--nvidia-kind=ours") || !strings.Contains(out, "--nvidia-kind=skip") {
		t.Fatalf("install cdi with NVIDIA's spec present: %v\n%s", err, out)
	}
	if after := readDir(t, specDir); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("install cdi changed %s without a choice: %v", specDir, after)
	}
	if _, err := os.Stat(filepath.Join(prefix, "etc/systemd")); err == nil {
		t.Fatal("install cdi wrote the unit without a choice")
	}

	// The choice after the engine name, as the message puts it.
	out, err = run(t, []string{"WSL_GPU_HOOK_CONFIG=" + h.config}, e.sim, append(args, "--nvidia-kind=ours")...)
	if err != nil {
		t.Fatalf("install cdi --nvidia-kind=ours: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(specDir, "nvidia.yaml")); err == nil {
		t.Error("NVIDIA's spec still in place")
	}
	if kept, err := os.ReadFile(filepath.Join(specDir, "nvidia.yaml.wsl-gpu-hook.bak")); err != nil || string(kept) != theirs {
		t.Errorf("NVIDIA's spec not kept aside: %v", err)
	}
	out, err = startNVIDIA(t, specDir)
	if err != nil {
		t.Fatalf("podman after --nvidia-kind=ours: %v\n%s", err, out)
	}
	checkGPU(t, out, true, e.nvidia)
}
