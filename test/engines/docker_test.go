package engines

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestDocker runs dockerd 20.10 (Debian 12's) under dxgsim with the hook
// installed as Docker expects it: an executable named
// nvidia-container-runtime-hook on dockerd's PATH, and the wsl-gpu runtime
// in daemon.json.
func TestDocker(t *testing.T) {
	e := setup(t)
	if _, err := exec.LookPath("dockerd"); err != nil {
		t.Skip("dockerd not installed (apt-get install docker.io)")
	}
	dir := t.TempDir()
	sock := filepath.Join(dir, "docker.sock")
	daemonJSON := filepath.Join(dir, "daemon.json")
	cfg := fmt.Sprintf(`{"runtimes": {"wsl-gpu": {"path": %q}}}`, filepath.Join(e.bin, "wsl-gpu-runtime"))
	if err := os.WriteFile(daemonJSON, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	mountsBefore := hostWSLMounts(t)
	d := startDaemon(t, e, nil, "dockerd",
		"--config-file", daemonJSON,
		"--data-root", filepath.Join(dir, "data"),
		"--exec-root", filepath.Join(dir, "exec"),
		"--pidfile", filepath.Join(dir, "docker.pid"),
		"-H", "unix://"+sock,
		"--iptables=false", "--ip6tables=false", "--bridge=none", "--storage-driver=vfs")
	defer d.stop(t)

	docker := func(args ...string) (string, error) {
		return run(t, nil, "docker", append([]string{"-H", "unix://" + sock}, args...)...)
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		if _, err := docker("version"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("dockerd did not come up:\n%s", d.stderr.String())
		}
		time.Sleep(300 * time.Millisecond)
	}
	f, err := os.Open(e.imgTar)
	if err != nil {
		t.Fatal(err)
	}
	imp := exec.Command("docker", "-H", "unix://"+sock, "import", "-", "wslgpu-test")
	imp.Stdin = f
	if out, err := imp.CombinedOutput(); err != nil {
		t.Fatalf("docker import: %v\n%s", err, out)
	}
	f.Close()

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
	// The runtime wrapper put the device into the spec: the rule is the
	// runtime's, so a docker update (which rewrites the device cgroup)
	// keeps it.
	t.Run("device rule survives docker update", func(t *testing.T) {
		id, err := docker("run", "-d", "--network", "none", "--runtime", "wsl-gpu", "-e", "WSL_GPU_DEVICES=all", "wslgpu-test", "sleep", "60")
		if err != nil {
			t.Fatalf("docker run -d: %v %s", err, id)
		}
		id = strings.TrimSpace(id)
		defer docker("rm", "-f", id)
		if out, err := docker("update", "--memory", "256m", "--memory-swap", "512m", id); err != nil {
			t.Fatalf("docker update: %v %s", err, out)
		}
		out, err := docker("exec", id, "sh", "-c", ": <> /dev/dxg && echo dxg-open")
		if err != nil || !strings.Contains(out, "dxg-open") {
			t.Fatalf("after docker update /dev/dxg no longer opens: %v %s", err, out)
		}
	})
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
