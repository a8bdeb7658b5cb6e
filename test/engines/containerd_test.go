package engines

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	cri "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// dockerArchive writes a `docker save` archive of rootfs tagged tag whose
// entrypoint is cmd: what `ctr images import` reads, so the CRI plugin has
// images with no registry.
func dockerArchive(rootfs, tag string, cmd []string, out string) error {
	layer, err := os.CreateTemp(filepath.Dir(out), "layer-*.tar")
	if err != nil {
		return err
	}
	defer os.Remove(layer.Name())
	tarCmd := exec.Command("tar", "-C", rootfs, "-cf", "-", ".")
	tarCmd.Stdout = layer
	if err := tarCmd.Run(); err != nil {
		return fmt.Errorf("tar rootfs: %w", err)
	}
	if _, err := layer.Seek(0, 0); err != nil {
		return err
	}
	h := sha256.New()
	if _, err := io.Copy(h, layer); err != nil {
		return err
	}
	diffID := "sha256:" + hex.EncodeToString(h.Sum(nil))
	config, _ := json.Marshal(map[string]any{
		"architecture": "amd64", "os": "linux",
		"config": map[string]any{"Entrypoint": cmd, "Env": []string{"PATH=/usr/local/bin:/bin"}},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{diffID}},
	})
	cs := sha256.Sum256(config)
	configName := hex.EncodeToString(cs[:]) + ".json"
	manifest, _ := json.Marshal([]map[string]any{{"Config": configName, "RepoTags": []string{tag}, "Layers": []string{"layer/layer.tar"}}})

	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	add := func(name string, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	if err := add("manifest.json", manifest); err != nil {
		return err
	}
	if err := add(configName, config); err != nil {
		return err
	}
	st, err := layer.Stat()
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: "layer/layer.tar", Mode: 0o644, Size: st.Size(), Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	if _, err := layer.Seek(0, 0); err != nil {
		return err
	}
	if _, err := io.Copy(tw, layer); err != nil {
		return err
	}
	return tw.Close()
}

// TestContainerdCRI runs containerd 1.6 (Debian 12's) with the wsl-gpu
// runtime handler of config/containerd/config-v2.toml, and drives it the
// way the kubelet does, over the CRI gRPC API: a pod sandbox on that handler
// asking for GPUs by pod annotation, then a container in it.
func TestContainerdCRI(t *testing.T) {
	e := setup(t)
	if _, err := exec.LookPath("containerd"); err != nil {
		t.Skip("containerd not installed")
	}
	dir := t.TempDir()
	sock := filepath.Join(dir, "containerd.sock")
	handler, err := os.ReadFile("../../config/containerd/config-v2.toml")
	if err != nil {
		t.Fatal(err)
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
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "native"
    # Any runtimes table replaces containerd's built-in map: keep runc.
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %q
    conf_dir = %q
`, filepath.Join(dir, "root"), filepath.Join(dir, "state"), sock, filepath.Join(dir, "cni-bin"), filepath.Join(dir, "cni-conf"))
	cfg += strings.ReplaceAll(string(handler), "/usr/local/bin/wsl-gpu-runtime", filepath.Join(e.bin, "wsl-gpu-runtime"))
	cfgPath := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	mountsBefore := hostWSLMounts(t)
	d := startDaemon(t, e, nil, "containerd", "--config", cfgPath)
	defer d.stop(t)

	ctr := func(args ...string) (string, error) {
		return run(t, nil, "ctr", append([]string{"--address", sock, "--namespace", "k8s.io"}, args...)...)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := ctr("version"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("containerd did not come up:\n%s", d.stderr.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	importImages(t, e, dir, ctr)
	rt, closeConn := criClient(t, sock)
	defer closeConn()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	podCfg := &cri.PodSandboxConfig{
		Metadata:     &cri.PodSandboxMetadata{Name: "cuda-check", Namespace: "default", Uid: "wslgpu-1", Attempt: 1},
		Annotations:  map[string]string{"wsl-gpu-hook/devices": "nvidia"},
		LogDirectory: filepath.Join(dir, "logs"),
		Linux: &cri.LinuxPodSandboxConfig{SecurityContext: &cri.LinuxSandboxSecurityContext{
			NamespaceOptions: &cri.NamespaceOption{Network: cri.NamespaceMode_NODE}, // no CNI here
		}},
	}
	pod, err := rt.RunPodSandbox(ctx, &cri.RunPodSandboxRequest{Config: podCfg, RuntimeHandler: "wsl-gpu"})
	if err != nil {
		t.Fatalf("RunPodSandbox: %v\ncontainerd:\n%s", err, grepLines(d.stderr.String(), "cri"))
	}
	defer func() {
		rt.StopPodSandbox(context.Background(), &cri.StopPodSandboxRequest{PodSandboxId: pod.PodSandboxId})
		rt.RemovePodSandbox(context.Background(), &cri.RemovePodSandboxRequest{PodSandboxId: pod.PodSandboxId})
	}()
	c, err := rt.CreateContainer(ctx, &cri.CreateContainerRequest{
		PodSandboxId:  pod.PodSandboxId,
		SandboxConfig: podCfg,
		Config: &cri.ContainerConfig{
			Metadata: &cri.ContainerMetadata{Name: "check"},
			Image:    &cri.ImageSpec{Image: "docker.io/library/wslgpu-test:latest"},
			Command:  []string{"/bin/sleep", "3600"},
			LogPath:  "check.log",
		},
	})
	if err != nil {
		t.Fatalf("CreateContainer: %v", err)
	}
	if _, err := rt.StartContainer(ctx, &cri.StartContainerRequest{ContainerId: c.ContainerId}); err != nil {
		log, _ := os.ReadFile(filepath.Join(e.dir, "hook.log"))
		t.Fatalf("StartContainer: %v\nhook log:\n%s", err, tail(string(log), 10))
	}
	defer rt.RemoveContainer(context.Background(), &cri.RemoveContainerRequest{ContainerId: c.ContainerId})
	res, err := rt.ExecSync(ctx, &cri.ExecSyncRequest{ContainerId: c.ContainerId, Cmd: []string{"sh", "-c", inside}, Timeout: 60})
	if err != nil {
		t.Fatalf("ExecSync: %v", err)
	}
	checkGPU(t, string(res.Stdout)+string(res.Stderr), true, e.nvidia)
	rt.StopContainer(ctx, &cri.StopContainerRequest{ContainerId: c.ContainerId, Timeout: 1})
	if after := hostWSLMounts(t); after != mountsBefore {
		t.Errorf("WSL mounts leaked into the host:\n%s", after)
	}
}

// importImages puts the pause and test images, both the test image tree,
// into containerd through ctr.
func importImages(t *testing.T, e *env, dir string, ctr func(args ...string) (string, error)) {
	t.Helper()
	for _, tag := range []string{"docker.io/library/wslgpu-pause:latest", "docker.io/library/wslgpu-test:latest"} {
		archive := filepath.Join(dir, "image.tar")
		if err := dockerArchive(e.rootfs, tag, []string{"/bin/sleep", "3600"}, archive); err != nil {
			t.Fatal(err)
		}
		if out, err := ctr("images", "import", archive); err != nil {
			t.Fatalf("ctr import %s: %v\n%s", tag, err, out)
		}
	}
}

// criClient connects to containerd's CRI on sock, as the kubelet does.
func criClient(t *testing.T, sock string) (cri.RuntimeServiceClient, func()) {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	return cri.NewRuntimeServiceClient(conn), func() { conn.Close() }
}
