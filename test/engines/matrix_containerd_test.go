package engines

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cri "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// criRow is one way a Kubernetes pod asks containerd for a GPU: a CDI
// device in the container's config (what the kubelet sends for a device
// plugin's CDI answer), or the wsl-gpu runtime handler (a RuntimeClass)
// with the pod annotation.
type criRow struct {
	name       string
	cdi        string // CDI device name
	handler    string // RuntimeClass handler
	annotation string // wsl-gpu-hook/devices pod annotation
	// userns gives the pod a user namespace of its own, as the kubelet
	// does for hostUsers: false (root is host uid 4000000).
	userns  bool
	folders func(e *env) []string
}

var criRows = []criRow{
	{name: "CRI pod, CDI nvidia.com/gpu=all", cdi: "nvidia.com/gpu=all", folders: nvidiaOnly},
	{name: "CRI pod, CDI nvidia.com/gpu=0", cdi: "nvidia.com/gpu=0", folders: nvidiaOnly},
	{name: "CRI pod, CDI wsl-gpu-hook.dev/gpu=nvidia", cdi: "wsl-gpu-hook.dev/gpu=nvidia", folders: nvidiaOnly},
	{name: "CRI pod, runtime handler wsl-gpu", handler: "wsl-gpu", annotation: "nvidia", folders: nvidiaOnly},
}

// containerdColumn is one containerd build, its config and its runc.
type containerdColumn struct {
	name   string
	world  func(t *testing.T, m *matrix) world
	ctr    func(t *testing.T, m *matrix) string
	config func(m *matrix, dir, sock string) (string, error) // writes the config, returns its path
	skip   map[string]string
}

// start runs the column's containerd in w with its socket and state in
// dir, and waits until it answers. ctr runs the column's ctr against it in
// the k8s.io namespace.
func (col containerdColumn) start(t *testing.T, m *matrix, w world, dir string) (d *daemon, sock string, ctr func(args ...string) (string, error)) {
	t.Helper()
	sock = filepath.Join(dir, "containerd.sock")
	cfgPath, err := col.config(m, dir, sock)
	if err != nil {
		t.Fatal(err)
	}
	d = m.startIn(t, w, "containerd", "--config", cfgPath)
	ctr = func(args ...string) (string, error) {
		return d.exec(t, "", append([]string{col.ctr(t, m), "--address", sock, "--namespace", "k8s.io"}, args...)...)
	}
	deadline := time.Now().Add(3 * time.Minute) // slow on a loaded 2-core machine
	for {
		out, err := ctr("version")
		if err == nil {
			return d, sock, ctr
		}
		if time.Now().After(deadline) || d.cmd.ProcessState != nil {
			d.stop(t)
			t.Fatalf("containerd did not come up: ctr version: %v %s\n%s", err, out, tail(d.stderr.String(), 30))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

var containerdColumns = []containerdColumn{
	{
		name: "containerd 1.6 (Debian 12)", world: host, ctr: named("ctr"), config: configV2(false),
		skip: map[string]string{
			"CRI pod, CDI nvidia.com/gpu=all":          "containerd 1.6 has no CDI in CRI (1.7+)",
			"CRI pod, CDI nvidia.com/gpu=0":            "containerd 1.6 has no CDI in CRI (1.7+)",
			"CRI pod, CDI wsl-gpu-hook.dev/gpu=nvidia": "containerd 1.6 has no CDI in CRI (1.7+)",
		},
	},
	{name: "containerd 1.7 + runc 1.1 (Debian 13)", world: trixie, ctr: named("ctr"), config: configV2(true)},
	{
		name: "containerd 2.4 + runc 1.5 (Go modules)", ctr: func(t *testing.T, m *matrix) string { return filepath.Join(m.engine(t, "containerd"), "ctr") },
		world: func(t *testing.T, m *matrix) world {
			w := trixie(t, m)
			w.path = []string{m.engine(t, "containerd"), m.engine(t, "runc")}
			return w
		},
		config: configV3,
	},
}

// handlerFile is the shipped handler config with the runtime's test path.
func (m *matrix) handlerFile(name string) (string, error) {
	data, err := os.ReadFile("../../config/containerd/" + name)
	if err != nil {
		return "", err
	}
	return strings.ReplaceAll(string(data), "/usr/local/bin/wsl-gpu-runtime", filepath.Join(m.e.bin, "wsl-gpu-runtime")), nil
}

// configV2 is containerd 1.x's config: the handler appended to the file,
// as `install containerd` does, and for 1.7 CDI switched on.
func configV2(cdi bool) func(m *matrix, dir, sock string) (string, error) {
	return func(m *matrix, dir, sock string) (string, error) {
		handler, err := m.handlerFile("config-v2.toml")
		if err != nil {
			return "", err
		}
		cdiCfg := ""
		if cdi {
			cdiCfg = "  enable_cdi = true\n  cdi_spec_dirs = [\"/etc/cdi\", \"/var/run/cdi\"]\n"
		}
		cfg := fmt.Sprintf(`version = 2
root = %q
state = %q
[grpc]
  address = %q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "docker.io/library/wslgpu-pause:latest"
  # The pause container asks for oom_score_adj -998, which needs
  # CAP_SYS_RESOURCE; this sandbox's root lacks it.
  restrict_oom_score_adj = true
%s  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "native"
    # Any runtimes table replaces containerd's built-in map: keep runc.
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %q
    conf_dir = %q
`, filepath.Join(dir, "root"), filepath.Join(dir, "state"), sock, cdiCfg, filepath.Join(dir, "cni-bin"), filepath.Join(dir, "cni-conf"))
		path := filepath.Join(dir, "config.toml")
		return path, os.WriteFile(path, []byte(cfg+handler), 0o644)
	}
}

// configV3 is containerd 2.x's config (version 3), which imports drop-ins
// from conf.d as 2.2+'s default config does: the shipped handler file goes
// there unchanged but for the runtime's path. CDI is on by default.
func configV3(m *matrix, dir, sock string) (string, error) {
	handler, err := m.handlerFile("config-v3.toml")
	if err != nil {
		return "", err
	}
	confd := filepath.Join(dir, "conf.d")
	if err := os.MkdirAll(confd, 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(confd, "wsl-gpu-hook.toml"), []byte(handler), 0o644); err != nil {
		return "", err
	}
	cfg := fmt.Sprintf(`version = 3
root = %q
state = %q
imports = [%q]
[grpc]
  address = %q
[plugins.'io.containerd.cri.v1.images']
  snapshotter = "native"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "docker.io/library/wslgpu-pause:latest"
[plugins.'io.containerd.cri.v1.runtime']
  restrict_oom_score_adj = true
  [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = [%q]
    conf_dir = %q
`, filepath.Join(dir, "root"), filepath.Join(dir, "state"), filepath.Join(confd, "*.toml"), sock, filepath.Join(dir, "cni-bin"), filepath.Join(dir, "cni-conf"))
	path := filepath.Join(dir, "config.toml")
	return path, os.WriteFile(path, []byte(cfg), 0o644)
}

// TestMatrixContainerd runs each CRI request form on each containerd
// column, driving containerd over the CRI gRPC API as the kubelet does.
func TestMatrixContainerd(t *testing.T) {
	m := setupMatrix(t)
	e := m.e
	mountsBefore := hostWSLMounts(t)
	for _, col := range containerdColumns {
		t.Run(col.name, func(t *testing.T) {
			w := col.world(t, m)
			dir := shortTemp(t, "wgm-ctrd-")
			d, sock, ctr := col.start(t, m, w, dir)
			defer d.stop(t)
			if out, err := ctr("version"); err == nil {
				t.Logf("%s", strings.Join(strings.Fields(grepLines(out, "Version")), " "))
			}
			importImages(t, e, dir, ctr)
			rt, closeConn := criClient(t, sock)
			defer closeConn()
			for i, row := range criRows {
				t.Run(row.name, func(t *testing.T) {
					if why, ok := col.skip[row.name]; ok {
						t.Skip(why)
					}
					out, err := criRun(t, rt, dir, i, row)
					if err != nil {
						t.Fatalf("%v\nhook log:\n%s\ncontainerd:\n%s", err, m.hookLogTail(), tail(grepLines(d.stderr.String(), "level=error"), 10))
					}
					checkRow(t, e, out, row.folders(e))
				})
			}
		})
	}
	m.hostClean(t, mountsBefore)
}

// criRun runs a pod for row, a container in it and the GPU check in that,
// removes them again, and returns the check's output.
func criRun(t *testing.T, rt cri.RuntimeServiceClient, dir string, i int, row criRow) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	podCfg := &cri.PodSandboxConfig{
		Metadata:     &cri.PodSandboxMetadata{Name: fmt.Sprintf("gpu-%d", i), Namespace: "default", Uid: fmt.Sprintf("wslgpu-matrix-%d", i), Attempt: 1},
		LogDirectory: filepath.Join(dir, "logs", fmt.Sprint(i)),
		Linux: &cri.LinuxPodSandboxConfig{SecurityContext: &cri.LinuxSandboxSecurityContext{
			NamespaceOptions: &cri.NamespaceOption{Network: cri.NamespaceMode_NODE}, // no CNI here
		}},
	}
	if row.annotation != "" {
		podCfg.Annotations = map[string]string{"wsl-gpu-hook/devices": row.annotation}
	}
	script := inside
	if row.userns {
		ids := []*cri.IDMapping{{HostId: 4000000, ContainerId: 0, Length: 65536}}
		podCfg.Linux.SecurityContext.NamespaceOptions.UsernsOptions = &cri.UserNamespace{Mode: cri.NamespaceMode_POD, Uids: ids, Gids: ids}
		script = remapped + inside
	}
	pod, err := rt.RunPodSandbox(ctx, &cri.RunPodSandboxRequest{Config: podCfg, RuntimeHandler: row.handler})
	if err != nil {
		return "", fmt.Errorf("RunPodSandbox: %w", err)
	}
	defer func() {
		rt.StopPodSandbox(context.Background(), &cri.StopPodSandboxRequest{PodSandboxId: pod.PodSandboxId})
		rt.RemovePodSandbox(context.Background(), &cri.RemovePodSandboxRequest{PodSandboxId: pod.PodSandboxId})
	}()
	cfg := &cri.ContainerConfig{
		Metadata: &cri.ContainerMetadata{Name: "check"},
		Image:    &cri.ImageSpec{Image: "docker.io/library/wslgpu-test:latest"},
		Command:  []string{"/bin/sleep", "3600"},
		LogPath:  "check.log",
	}
	if row.cdi != "" {
		cfg.CDIDevices = []*cri.CDIDevice{{Name: row.cdi}}
	}
	if row.userns {
		// The kubelet sends the pod's namespaces with each container.
		cfg.Linux = &cri.LinuxContainerConfig{SecurityContext: &cri.LinuxContainerSecurityContext{
			NamespaceOptions: podCfg.Linux.SecurityContext.NamespaceOptions,
		}}
	}
	c, err := rt.CreateContainer(ctx, &cri.CreateContainerRequest{PodSandboxId: pod.PodSandboxId, SandboxConfig: podCfg, Config: cfg})
	if err != nil {
		return "", fmt.Errorf("CreateContainer: %w", err)
	}
	defer rt.RemoveContainer(context.Background(), &cri.RemoveContainerRequest{ContainerId: c.ContainerId})
	if _, err := rt.StartContainer(ctx, &cri.StartContainerRequest{ContainerId: c.ContainerId}); err != nil {
		return "", fmt.Errorf("StartContainer: %w", err)
	}
	defer rt.StopContainer(context.Background(), &cri.StopContainerRequest{ContainerId: c.ContainerId, Timeout: 1})
	res, err := rt.ExecSync(ctx, &cri.ExecSyncRequest{ContainerId: c.ContainerId, Cmd: []string{"sh", "-c", script}, Timeout: 60})
	if err != nil {
		return "", fmt.Errorf("ExecSync: %w", err)
	}
	return string(res.Stdout) + string(res.Stderr), nil
}
