package engines

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// dockerRows are the request forms Docker users type. --gpus goes through
// the legacy prestart hook (every adapter for all, the first NVIDIA GPU
// for 1) unless a column turns it into CDI.
var dockerRows = []gpuRow{
	{name: "--gpus all", args: []string{"--gpus", "all"}, folders: allGPUs},
	{name: "--gpus 1", args: []string{"--gpus", "1"}, folders: nvidiaOnly},
	{name: "--device nvidia.com/gpu=all", args: []string{"--device", "nvidia.com/gpu=all"}, folders: nvidiaOnly},
	{name: "--device nvidia.com/gpu=0", args: []string{"--device", "nvidia.com/gpu=0"}, folders: nvidiaOnly},
	{name: "--device wsl-gpu-hook.dev/gpu=nvidia", args: []string{"--device", "wsl-gpu-hook.dev/gpu=nvidia"}, folders: nvidiaOnly},
	{name: "--device wsl-gpu-hook.dev/gpu=intel", args: []string{"--device", "wsl-gpu-hook.dev/gpu=intel"}, folders: intelOnly},
	{name: "--runtime wsl-gpu", args: []string{"--runtime", "wsl-gpu", "-e", "WSL_GPU_DEVICES=all"}, folders: allGPUs},
}

// dockerColumn is one Docker daemon build with its containerd and runc.
type dockerColumn struct {
	name  string
	world func(t *testing.T, m *matrix) world
	// cdiHook puts an executable named nvidia-cdi-hook on dockerd's PATH:
	// Docker 29.2+ then turns --gpus into CDI nvidia.com/gpu names.
	cdiHook bool
	skip    map[string]string
	folders map[string]func(e *env) []string // rows whose result differs here
}

func goModules(t *testing.T, m *matrix) world {
	w := trixie(t, m)
	w.name = "debian13+gomod"
	w.path = []string{m.engine(t, "dockerd"), m.engine(t, "containerd"), m.engine(t, "runc")}
	return w
}

var dockerColumns = []dockerColumn{
	{
		name: "Docker 20.10 (Debian 12)", world: host,
		skip: map[string]string{
			"--device nvidia.com/gpu=all":          "Docker 20.10 has no CDI (Docker 25+)",
			"--device nvidia.com/gpu=0":            "Docker 20.10 has no CDI (Docker 25+)",
			"--device wsl-gpu-hook.dev/gpu=nvidia": "Docker 20.10 has no CDI (Docker 25+)",
			"--device wsl-gpu-hook.dev/gpu=intel":  "Docker 20.10 has no CDI (Docker 25+)",
		},
	},
	{name: "Docker 26.1 (Debian 13)", world: trixie},
	{name: "Docker 29.8 + containerd 2.4 + runc 1.5 (Go modules)", world: goModules},
	{
		name: "Docker 29.8 + containerd 2.4 + runc 1.5 (Go modules), nvidia-cdi-hook on PATH", world: goModules, cdiHook: true,
		folders: map[string]func(e *env) []string{
			// CDI nvidia.com/gpu=all: the NVIDIA adapters only.
			"--gpus all": nvidiaOnly,
		},
	},
}

// TestMatrixDocker runs every Docker request form on each Docker column.
func TestMatrixDocker(t *testing.T) {
	m := setupMatrix(t)
	e := m.e
	mountsBefore := hostWSLMounts(t)
	for _, col := range dockerColumns {
		t.Run(col.name, func(t *testing.T) {
			w := col.world(t, m)
			if col.cdiHook {
				dir := t.TempDir()
				// Docker only looks the name up; the CDI spec's own hooks run.
				if err := os.WriteFile(filepath.Join(dir, "nvidia-cdi-hook"), []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
					t.Fatal(err)
				}
				w.path = append([]string{dir}, w.path...)
			}
			docker, stop := m.startDockerIn(t, w)
			defer stop()
			if out, err := docker("version", "--format", "{{.Server.Version}} API {{.Server.APIVersion}}, client {{.Client.Version}}"); err == nil {
				t.Logf("dockerd %s", strings.TrimSpace(out))
			}
			for _, row := range dockerRows {
				t.Run(row.name, func(t *testing.T) {
					if why, ok := col.skip[row.name]; ok {
						t.Skip(why)
					}
					folders := row.folders
					if f, ok := col.folders[row.name]; ok {
						folders = f
					}
					// The legacy --gpus path sets NVIDIA_VISIBLE_DEVICES; the
					// CDI one does not: which one ran is checked, as Docker
					// falls back to the legacy hook when CDI injection fails.
					script := `echo "nvd=${NVIDIA_VISIBLE_DEVICES-unset}"; ` + inside
					args := append(append([]string{"run", "--rm", "--network", "none"}, row.args...), "wslgpu-test", "sh", "-c", script)
					out, err := docker(args...)
					if err != nil {
						t.Fatalf("docker run: %v\n%s\nhook log:\n%s", err, out, m.hookLogTail())
					}
					checkRow(t, e, out, folders(e))
					if row.args[0] == "--gpus" {
						if cdi := strings.Contains(out, "nvd=unset"); cdi != col.cdiHook {
							t.Errorf("--gpus went through CDI = %v, want %v:\n%s", cdi, col.cdiHook, out)
						}
					}
				})
			}
		})
	}
	m.hostClean(t, mountsBefore)
}

// startDockerIn starts dockerd in w under dxgsim with its state in a
// scratch dir (short: its sockets live there), CDI on and the wsl-gpu
// runtime in daemon.json, and imports the test image as wslgpu-test.
// extra are more dockerd flags.
func (m *matrix) startDockerIn(t *testing.T, w world, extra ...string) (docker func(args ...string) (string, error), stop func()) {
	t.Helper()
	dir := shortTemp(t, "wgm-docker-")
	// userns-remap's root must pass through to its data dir.
	if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "docker.sock")
	daemonJSON := filepath.Join(dir, "daemon.json")
	// Docker 25 to 28.1 need the cdi feature for --device vendor.com/class=name
	// (on by default from 28.2); 20.10 has no CDI.
	features := `, "features": {"cdi": true}`
	if w.root == "" {
		features = ""
	}
	cfg := fmt.Sprintf(`{"runtimes": {"wsl-gpu": {"path": %q}}%s}`, filepath.Join(m.e.bin, "wsl-gpu-runtime"), features)
	if err := os.WriteFile(daemonJSON, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	d := m.startIn(t, w, append([]string{"dockerd",
		"--config-file", daemonJSON,
		"--data-root", filepath.Join(dir, "data"),
		"--exec-root", filepath.Join(dir, "exec"),
		"--pidfile", filepath.Join(dir, "docker.pid"),
		"-H", "unix://" + sock,
		"--iptables=false", "--ip6tables=false", "--bridge=none", "--storage-driver=vfs"}, extra...)...)
	stop = func() { d.stop(t) }
	docker = func(args ...string) (string, error) {
		// /usr/bin: Debian's CLI in each world, whatever else is on PATH.
		return d.exec(t, "", append([]string{"/usr/bin/docker", "-H", "unix://" + sock}, args...)...)
	}
	deadline := time.Now().Add(3 * time.Minute) // slow on a loaded 2-core machine
	for {
		out, err := docker("version")
		if err == nil {
			break
		}
		if time.Now().After(deadline) || d.cmd.ProcessState != nil {
			stop()
			t.Fatalf("dockerd did not come up: docker version: %v %s\n%s", err, out, tail(d.stderr.String(), 30))
		}
		time.Sleep(300 * time.Millisecond)
	}
	if out, err := d.exec(t, m.e.imgTar, "/usr/bin/docker", "-H", "unix://"+sock, "import", "-", "wslgpu-test"); err != nil {
		stop()
		t.Fatalf("docker import: %v\n%s", err, out)
	}
	return docker, stop
}
