package k8s

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/k8s/cluster"
)

// hostSysctls are the host values a kubelet in a privileged node
// container could change: they must not move.
var hostSysctls = []string{"vm/overcommit_memory", "kernel/panic", "kernel/panic_on_oops"}

func readSysctls(t *testing.T) string {
	var b strings.Builder
	for _, s := range hostSysctls {
		v, err := os.ReadFile("/proc/sys/" + s)
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString(s + "=" + strings.TrimSpace(string(v)) + " ")
	}
	return b.String()
}

// TestNodeInContainer runs a GPU node the way kind, k3d and minikube's
// docker driver do on a WSL dev box: a privileged container started by a
// real engine with `--gpus all` through this project, running its own
// containerd and kubelet joined to the cluster. One engine at a time (a
// column), on one control plane: the Docker 29 daemon (containerd 2.4,
// runc 1.5) wired with `wsl-gpu-hook install docker` (--gpus runs the hook
// as Docker's legacy prestart hook), and Debian 13's podman 5.4 with the
// CDI specs of `wsl-gpu-hook install cdi` (--gpus is CDI nvidia.com/gpu).
// The plugin image is imported into the node's containerd as `kind load
// image-archive` does, the chart is installed, and a pod asking
// nvidia.com/gpu: 1 runs CUDA on the node-in-a-container.
func TestNodeInContainer(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a cluster and container engines")
	}
	// Its own cluster, names and dirs: it overlaps the other cluster test,
	// which spends most of its time waiting on pods, not on the CPU.
	t.Parallel()
	sysctls := readSysctls(t)
	scratch := t.TempDir()
	archive := makeImage(t, scratch)
	c := cluster.Start(t, cluster.Options{Images: []string{archive}})
	installed := false
	for _, col := range []struct {
		name, engine string
		// folders is how many driver folders the node container gets:
		// Docker's legacy --gpus hook asks for every adapter (the laptop's
		// Intel and NVIDIA), podman's CDI nvidia.com/gpu=all for NVIDIA's.
		folders int
	}{
		{"Docker 29.8 + containerd 2.4 + runc 1.5", cluster.EngineDocker, 2},
		{"podman 5.4 (Debian 13) + runc 1.5", cluster.EnginePodman, 1},
	} {
		t.Run(col.name, func(t *testing.T) {
			node := "kind-" + col.engine
			begin := time.Now()
			cn := c.StartContainerNode(t, cluster.ContainerNodeSpec{Name: node, Engine: col.engine, Profile: "nvidia-laptop",
				Hook: filepath.Join(scratch, "wsl-gpu-hook"), GPUArgs: []string{"--gpus", "all"}})
			nodeUp := time.Since(begin)
			x := tc{t, c}

			// What the engine gave the node container: the GPU through the hook.
			out, err := cn.Exec("sh", "-c", `: <> /dev/dxg && echo dxg-open; ls /usr/lib/wsl/drivers | sed 's/^/folder /'; [ -e /usr/lib/wsl/lib/libcuda.so.1 ] && echo lib-there; touch /usr/lib/wsl/lib/x 2>/dev/null && echo LIB-WRITABLE || echo lib-readonly`)
			if err != nil {
				t.Fatalf("%v\n%s", err, cn.Diagnose())
			}
			for _, want := range []string{"dxg-open", "folder " + nvidiaFolder + "\n", "lib-there", "lib-readonly"} {
				if !strings.Contains(out, want) {
					t.Errorf("the node container lacks %q:\n%s", want, out)
				}
			}
			if n := strings.Count(out, "folder "); n != col.folders {
				t.Errorf("the node container has %d driver folders, want %d:\n%s", n, col.folders, out)
			}

			ready := time.Now()
			if !installed {
				if out, err := c.Helm("install", "wsl-gpu-hook", chart, "-n", ns, "--create-namespace",
					"--set", "image.tag=e2e", "--set", "interval=2s", "--wait", "--timeout", "4m"); err != nil {
					t.Fatalf("helm install: %v\n%s\n%s\n%s", err, out, c.Diagnose(), cn.Diagnose())
				}
				installed = true
			}
			x.waitAllocatable(node, "nvidia.com/gpu", "1")
			p := "cuda-" + col.engine
			c.Apply(pod(p, "nvidia.com/gpu", 1))
			checkCUDA(t, x.waitChecks(p), nvidiaFolder)
			if got := x.field(p, "{.spec.nodeName}"); got != node {
				t.Errorf("the cuda pod runs on %s, want the container node %s", got, node)
			}
			gpuPod := time.Since(ready)
			usage, rss := cn.Memory()
			t.Logf("container node %s: Ready %s after its engine started; a CUDA pod checked %s later; memory (engine, node, pods) %d MiB, rss %d MiB",
				node, nodeUp.Round(time.Second), gpuPod.Round(time.Second), usage>>20, rss>>20)

			c.MustKubectl("delete", "pod", p, "--wait=false")
			cn.Stop(t)
			c.MustKubectl("delete", "node", node)
			if got := readSysctls(t); got != sysctls {
				t.Errorf("host sysctls changed: %s, were %s", got, sysctls)
			}
			data, _ := os.ReadFile("/proc/1/mountinfo")
			for _, l := range strings.Split(string(data), "\n") {
				if strings.Contains(l, cn.Dir) {
					t.Errorf("a mount of the container node leaked onto the host: %s", l)
				}
			}
			if cg, _ := filepath.Glob("/sys/fs/cgroup/*/" + filepath.Base(c.Dir) + "-c*"); len(cg) != 0 {
				t.Errorf("the container node's cgroups are left: %v", cg)
			}
		})
	}
}
