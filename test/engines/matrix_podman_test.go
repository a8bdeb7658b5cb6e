package engines

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// podmanRows are the request forms podman users type.
var podmanRows = []gpuRow{
	// podman 5 turns --gpus into CDI nvidia.com/gpu=<id>: NVIDIA only.
	{name: "--gpus all", args: []string{"--gpus", "all"}, folders: nvidiaOnly},
	{name: "--gpus 0", args: []string{"--gpus", "0"}, folders: nvidiaOnly},
	{name: "--device nvidia.com/gpu=all", args: []string{"--device", "nvidia.com/gpu=all"}, folders: nvidiaOnly},
	{name: "--device nvidia.com/gpu=0", args: []string{"--device", "nvidia.com/gpu=0"}, folders: nvidiaOnly},
	{name: "--device wsl-gpu-hook.dev/gpu=nvidia", args: []string{"--device", "wsl-gpu-hook.dev/gpu=nvidia"}, folders: nvidiaOnly},
	{name: "--device wsl-gpu-hook.dev/gpu=intel", args: []string{"--device", "wsl-gpu-hook.dev/gpu=intel"}, folders: intelOnly},
	{name: "hooks.d annotation", args: []string{"--annotation", "wsl-gpu-hook/devices=all"}, folders: allGPUs},
}

// podmanColumn is one podman build and the OCI runtime it drives.
type podmanColumn struct {
	name    string
	world   func(t *testing.T, m *matrix) world
	runtime func(t *testing.T, m *matrix) string // --runtime
	runArgs []string                             // more podman run flags
	cgroup  string                               // the container's /proc/self/cgroup must hold this
	skip    map[string]string                    // row -> why this engine cannot do it
}

var podmanColumns = []podmanColumn{
	{
		name: "podman 4.3 + runc 1.1 (Debian 12)", world: host, runtime: named("runc"),
		skip: map[string]string{
			"--gpus all": "podman 4.3 has no --gpus option (podman 5.0 adds it, as CDI nvidia.com/gpu)",
			"--gpus 0":   "podman 4.3 has no --gpus option (podman 5.0 adds it, as CDI nvidia.com/gpu)",
		},
	},
	{name: "podman 5.4 + runc 1.1 (Debian 13)", world: trixie, runtime: named("runc")},
	{
		// crun refuses this host's hybrid layout ("cgroups in hybrid mode
		// not supported, drop all controllers from cgroupv2": hugetlb is
		// on v2). Shown only the unified hierarchy, crun puts the container
		// in a v2 cgroup with an eBPF device program, which the hooks.d
		// row's hook must widen for /dev/dxg. That hierarchy has no pids
		// controller here (it is bound to v1): no pids limit. The host cgroup
		// namespace shows the container its v2 cgroup path.
		name: "podman 5.4 + crun 1.21 (Debian 13), cgroup v2 only", world: trixieCgroup2, runtime: named("crun"),
		runArgs: []string{"--pids-limit", "0", "--cgroupns", "host"}, cgroup: "0::/libpod_parent/libpod-",
	},
	{name: "podman 5.4 + runc 1.5 (Go module)", world: trixie, runtime: func(t *testing.T, m *matrix) string { return filepath.Join(m.engine(t, "runc"), "runc") }},
}

// podman is the podman command line of the column's every call: storage
// under dir, the column's runtime, and a hooks.d dir in dir holding the
// shipped hooks.d file.
func (col podmanColumn) podman(t *testing.T, m *matrix, dir string) []string {
	t.Helper()
	hooksDir := filepath.Join(dir, "hooks.d")
	if err := os.MkdirAll(hooksDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(hooksDir, "wsl-gpu-hook.json"), shippedHooksFile(t, m.e.hook, m.config), 0o644); err != nil {
		t.Fatal(err)
	}
	return []string{"podman",
		"--root", filepath.Join(dir, "storage"), "--runroot", "/run/podman-test",
		"--runtime", col.runtime(t, m), "--cgroup-manager", "cgroupfs", "--events-backend", "none",
		"--hooks-dir", hooksDir}
}

// TestMatrixPodman runs every podman request form on each podman column.
func TestMatrixPodman(t *testing.T) {
	m := setupMatrix(t)
	e := m.e
	mountsBefore := hostWSLMounts(t)
	for _, col := range podmanColumns {
		t.Run(col.name, func(t *testing.T) {
			w := col.world(t, m)
			base := col.podman(t, m, shortTemp(t, "wgm-podman-"))
			if out, err := m.runIn(t, w, append(append([]string{}, base...), "version", "--format", "{{.Client.Version}}")...); err != nil {
				t.Fatalf("podman version: %v\n%s", err, out)
			} else {
				t.Logf("podman %s, runtime %s", strings.TrimSpace(lastLine(out)), col.runtime(t, m))
			}
			for _, row := range podmanRows {
				t.Run(row.name, func(t *testing.T) {
					if why, ok := col.skip[row.name]; ok {
						t.Skip(why)
					}
					rootfs := filepath.Join(t.TempDir(), "rootfs")
					if out, err := exec.Command("cp", "-a", e.rootfs, rootfs).CombinedOutput(); err != nil {
						t.Fatalf("copy rootfs: %v %s", err, out)
					}
					args := append(append(append([]string{}, base...), "run", "--rm", "--network", "none",
						"--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024"), col.runArgs...)
					args = append(args, row.args...)
					args = append(args, "--rootfs", rootfs, "sh", "-c", "sed 's/^/cgroup /' /proc/self/cgroup; "+inside)
					out, err := m.runIn(t, w, args...)
					if err != nil {
						t.Fatalf("podman run: %v\n%s\nhook log:\n%s", err, out, m.hookLogTail())
					}
					checkRow(t, e, out, row.folders(e))
					if col.cgroup != "" && !strings.Contains(out, "cgroup "+col.cgroup) {
						t.Errorf("the container's cgroup is not %s...:\n%s", col.cgroup, out)
					}
				})
			}
		})
	}
	m.hostClean(t, mountsBefore)
}

func lastLine(s string) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	return l[len(l)-1]
}
