package engines

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// TestDocker runs dockerd 20.10 (Debian 12's) under dxgsim with the hook
// installed as Docker expects it: an executable named
// nvidia-container-runtime-hook on dockerd's PATH, and the wsl-gpu runtime
// in daemon.json.
func TestDocker(t *testing.T) {
	e := setup(t)
	mountsBefore := hostWSLMounts(t)
	docker, dir, stop := startDocker(t, e)
	defer stop()

	tests := []struct {
		name    string
		args    []string
		folders []string // nil: the container must get no GPU at all
	}{
		{name: "--gpus all", args: []string{"--gpus", "all"}, folders: []string{e.intel, e.nvidia}},
		// --gpus 1 sets NVIDIA_VISIBLE_DEVICES=0: the first NVIDIA GPU,
		// though the Intel iGPU is adapter 0 on this laptop.
		{name: "--gpus 1", args: []string{"--gpus", "1"}, folders: []string{e.nvidia}},
		{name: "--gpus device=0", args: []string{"--gpus", `"device=0"`}, folders: []string{e.nvidia}},
		{name: "--runtime wsl-gpu", args: []string{"--runtime", "wsl-gpu", "-e", "WSL_GPU_DEVICES=all"}, folders: []string{e.intel, e.nvidia}},
		{name: "--runtime wsl-gpu intel only", args: []string{"--runtime", "wsl-gpu", "-e", "WSL_GPU_DEVICES=intel"}, folders: []string{e.intel}},
		{name: "no --gpus", args: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"run", "--rm", "--network", "none"}, tt.args...)
			if tt.folders == nil {
				out, err := docker(append(args, "wslgpu-test", "sh", "-c", "ls /dev/dxg /usr/lib/wsl 2>&1; true")...)
				if err != nil || !strings.Contains(out, "/dev/dxg: No such file or directory") || !strings.Contains(out, "/usr/lib/wsl: No such file or directory") {
					t.Fatalf("a container without --gpus got GPU files (%v):\n%s", err, out)
				}
				return
			}
			out, err := docker(append(args, "wslgpu-test", "sh", "-c", inside)...)
			if err != nil {
				log, _ := os.ReadFile(filepath.Join(e.dir, "hook.log"))
				t.Fatalf("docker run: %v\n%s\nhook log tail:\n%s", err, out, tail(string(log), 15))
			}
			checkGPU(t, out, slices.Contains(tt.folders, e.nvidia), tt.folders...)
		})
	}
	// The wrapper puts /dev/dxg and its allow rule into the container's
	// spec, so the runtime itself owns the rule and re-applies it on
	// docker update and systemd reloads (a hook-added rule is the
	// runtime's to drop: NVIDIA toolkit#48). On this machine's cgroup v1
	// runc keeps a hook-added rule across docker update too, so the spec
	// itself is what is checked; the exec after the update is a sanity check.
	t.Run("wrapper puts the device into the spec", func(t *testing.T) {
		for _, c := range []struct {
			args   []string
			inSpec bool
		}{
			{[]string{"--runtime", "wsl-gpu", "-e", "WSL_GPU_DEVICES=all"}, true},
			{[]string{"--gpus", "all"}, false},
		} {
			args := append(append([]string{"run", "-d", "--network", "none"}, c.args...), "wslgpu-test", "sleep", "60")
			id, err := docker(args...)
			if err != nil {
				t.Fatalf("docker run -d: %v %s", err, id)
			}
			id = strings.TrimSpace(id)
			defer docker("rm", "-f", id)
			got := specHasDxg(t, filepath.Join(dir, "exec"), id)
			if got != c.inSpec {
				t.Errorf("%v: /dev/dxg with its rule in the spec = %v, want %v", c.args, got, c.inSpec)
			}
			if out, err := docker("update", "--memory", "256m", "--memory-swap", "512m", id); err != nil {
				t.Fatalf("docker update: %v %s", err, out)
			}
			if out, err := docker("exec", id, "sh", "-c", ": <> /dev/dxg && echo dxg-open"); err != nil || !strings.Contains(out, "dxg-open") {
				t.Errorf("%v: after docker update /dev/dxg does not open: %v %s", c.args, err, out)
			}
		}
	})
	if after := hostWSLMounts(t); after != mountsBefore {
		t.Errorf("WSL mounts leaked into the host:\n%s", after)
	}
}

// startDocker starts dockerd under dxgsim with its state in a scratch dir,
// extra flags appended, and imports the test image as wslgpu-test. It
// returns the client, the scratch dir and what stops the daemon.
func startDocker(t *testing.T, e *env, flags ...string) (docker func(args ...string) (string, error), dir string, stop func()) {
	t.Helper()
	if _, err := exec.LookPath("dockerd"); err != nil {
		t.Skip("dockerd not installed (apt-get install docker.io)")
	}
	dir = t.TempDir()
	// A remapped root must be able to pass through to the data root.
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	sock := filepath.Join(dir, "docker.sock")
	daemonJSON := filepath.Join(dir, "daemon.json")
	cfg := fmt.Sprintf(`{"runtimes": {"wsl-gpu": {"path": %q}}}`, filepath.Join(e.bin, "wsl-gpu-runtime"))
	if err := os.WriteFile(daemonJSON, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, e, nil, append([]string{"dockerd",
		"--config-file", daemonJSON,
		"--data-root", filepath.Join(dir, "data"),
		"--exec-root", filepath.Join(dir, "exec"),
		"--pidfile", filepath.Join(dir, "docker.pid"),
		"-H", "unix://" + sock,
		"--iptables=false", "--ip6tables=false", "--bridge=none", "--storage-driver=vfs"}, flags...)...)
	stop = func() { d.stop(t) }

	docker = func(args ...string) (string, error) {
		return run(t, nil, "docker", append([]string{"-H", "unix://" + sock}, args...)...)
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		if _, err := docker("version"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			stop()
			t.Fatalf("dockerd did not come up:\n%s", d.stderr.String())
		}
		time.Sleep(300 * time.Millisecond)
	}
	f, err := os.Open(e.imgTar)
	if err != nil {
		stop()
		t.Fatal(err)
	}
	defer f.Close()
	imp := exec.Command("docker", "-H", "unix://"+sock, "import", "-", "wslgpu-test")
	imp.Stdin = f
	if out, err := imp.CombinedOutput(); err != nil {
		stop()
		t.Fatalf("docker import: %v\n%s", err, out)
	}
	return docker, dir, stop
}

// TestDockerUsernsRemap runs dockerd with userns-remap, so every container
// has a user namespace of its own (root mapped to the subordinate ids of
// wsl-gpu-rootless): `--gpus` must still give a /dev/dxg that opens, which
// the hook binds from the host because a node made on such a /dev could
// not be opened.
func TestDockerUsernsRemap(t *testing.T) {
	e := setup(t)
	if _, err := user.Lookup(rootlessUser); err != nil {
		t.Skipf("no user %s with subordinate ids: run hack/setup.sh", rootlessUser)
	}
	mountsBefore := hostWSLMounts(t)
	docker, _, stop := startDocker(t, e, "--userns-remap", rootlessUser)
	defer stop()
	for _, tt := range []struct {
		name    string
		args    []string
		folders []string
	}{
		{name: "--gpus all", args: []string{"--gpus", "all"}, folders: []string{e.intel, e.nvidia}},
		{name: "--gpus 1", args: []string{"--gpus", "1"}, folders: []string{e.nvidia}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			args := append(append([]string{"run", "--rm", "--network", "none"}, tt.args...), "wslgpu-test", "sh", "-c", "cat /proc/self/uid_map; "+inside)
			out, err := docker(args...)
			if err != nil {
				log, _ := os.ReadFile(filepath.Join(e.dir, "hook.log"))
				t.Fatalf("docker run: %v\n%s\nhook log tail:\n%s", err, out, tail(string(log), 15))
			}
			if f := strings.Fields(out); len(f) < 3 || f[0] != "0" || f[1] == "0" {
				t.Fatalf("the container is not in a remapped user namespace:\n%s", out)
			}
			checkGPU(t, out, slices.Contains(tt.folders, e.nvidia), tt.folders...)
		})
	}
	if after := hostWSLMounts(t); after != mountsBefore {
		t.Errorf("WSL mounts leaked into the host:\n%s", after)
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// specHasDxg reports whether the OCI spec containerd handed the runtime for
// container id lists /dev/dxg in linux.devices and allows it in
// linux.resources.devices.
func specHasDxg(t *testing.T, execRoot, id string) bool {
	t.Helper()
	matches, _ := filepath.Glob(filepath.Join(execRoot, "containerd", "daemon", "io.containerd.runtime.v2.task", "moby", id, "config.json"))
	if len(matches) != 1 {
		t.Fatalf("bundle of %s not found under %s", id, execRoot)
	}
	data, err := os.ReadFile(matches[0])
	if err != nil {
		t.Fatal(err)
	}
	var spec specs.Spec
	if err := json.Unmarshal(data, &spec); err != nil {
		t.Fatal(err)
	}
	dev, rule := false, false
	for _, d := range spec.Linux.Devices {
		dev = dev || d.Path == "/dev/dxg"
	}
	for _, r := range spec.Linux.Resources.Devices {
		rule = rule || (r.Allow && r.Major != nil && *r.Major == 10 && r.Minor != nil && *r.Minor == 229)
	}
	return dev && rule
}
