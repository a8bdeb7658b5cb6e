package k8s

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/k8s/cluster"
)

const (
	ns    = "wsl-gpu-hook"
	chart = "../../deploy/helm/wsl-gpu-hook"
	image = "localhost/wsl-gpu-hook:e2e"
	// The simulated hosts' driver folders.
	nvidiaFolder = "nvltwi.inf_amd64_7b2a5c1c4e6f8d90"
	amdFolder    = "u0398975.inf_amd64_cab3843582148687"
	updated      = "nvltwi.inf_amd64_00000000c0ffee01"
)

// makeImage runs `make image` into dir and returns the archive.
func makeImage(t *testing.T, dir string) string {
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("make", "-s", "image", "BIN="+dir, "IMAGE="+image)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make image: %v\n%s", err, out)
	}
	return filepath.Join(dir, "wsl-gpu-hook-image.tar")
}

// gpuScript is what a GPU workload checks and prints, then sleeps.
const gpuScript = `: <> /dev/dxg && echo dxg-open
ls /usr/lib/wsl/drivers | sed 's/^/folder /'
cudaprobe
touch /usr/lib/wsl/lib/x 2>/dev/null && echo LIB-WRITABLE || echo lib-readonly
echo checks-done
exec sleep 3600`

func podSpec(resource string, n int) string {
	return `      terminationGracePeriodSeconds: 1
      containers:
      - name: main
        image: ` + cluster.TestImage + `
        imagePullPolicy: Never
        command: ["sh", "-c", ` + strconv.Quote(gpuScript) + `]
        resources:
          limits: {` + resource + `: ` + strconv.Itoa(n) + `}
`
}

func deployment(name, resource string, replicas int) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: %[1]s}
spec:
  replicas: %[2]d
  selector: {matchLabels: {app: %[1]s}}
  template:
    metadata: {labels: {app: %[1]s}}
    spec:
%[3]s`, name, replicas, podSpec(resource, 1))
}

func pod(name, resource string, n int) string {
	spec := strings.ReplaceAll(podSpec(resource, n), "\n      ", "\n  ")
	return fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata: {name: %s}\nspec:\n  restartPolicy: Never\n%s", name, strings.TrimPrefix(spec, "    "))
}

// updateNVIDIADriver does on a simulated NVIDIA laptop what a Windows driver
// update does: the driver store folder gets a new name (updated), and the
// adapter reports it (dxgsim's --folder-file).
func updateNVIDIADriver(t *testing.T, hostTree, folderFile string) {
	t.Helper()
	drivers := filepath.Join(hostTree, "usr/lib/wsl/drivers")
	if err := os.Rename(filepath.Join(drivers, nvidiaFolder), filepath.Join(drivers, updated)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(folderFile, []byte("1="+updated+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// checkCUDA asserts what a user checks inside the container.
func checkCUDA(t *testing.T, out, folder string) {
	t.Helper()
	for _, want := range []string{"dxg-open", "cudaprobe: loaded /usr/lib/wsl/lib/libcuda.so.1", "cudaprobe: cuInit(0) = 0", "lib-readonly", "folder " + folder + "\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("container output lacks %q:\n%s", want, out)
		}
	}
	if c := strings.Count(out, "folder "); c != 1 {
		t.Errorf("%d driver folders in the container, want only %s:\n%s", c, folder, out)
	}
}

// kube is what the checks need of a cluster: the harness's (cluster.Cluster)
// or a kind cluster on a simulated WSL host (cluster.KindHost).
type kube interface {
	Kubectl(args ...string) (string, error)
	Apply(manifest string)
	Wait(t testing.TB, d time.Duration, what string, cond func() bool)
}

type tc struct {
	*testing.T
	c kube
}

func (x tc) allocatable(node, resource string) string {
	out, _ := x.c.Kubectl("get", "node", node, "-o", "jsonpath={.status.allocatable."+strings.ReplaceAll(resource, ".", `\.`)+"}")
	return out
}

func (x tc) wait(d time.Duration, what string, cond func() bool) {
	x.Helper()
	x.c.Wait(x.T, d, what, cond)
}

// nsField is field for a pod in the chart's namespace.
func (x tc) nsField(pod, path string) string {
	out, _ := x.c.Kubectl("-n", ns, "get", "pod", pod, "-o", "jsonpath="+path)
	return out
}

func (x tc) label(node, key string) string {
	out, _ := x.c.Kubectl("get", "node", node, "-o", "jsonpath={.metadata.labels."+strings.ReplaceAll(key, ".", `\.`)+"}")
	return out
}

func (x tc) waitAllocatable(node, resource, want string) {
	x.Helper()
	x.wait(3*time.Minute, fmt.Sprintf("node %s allocatable %s = %q", node, resource, want), func() bool {
		return x.allocatable(node, resource) == want
	})
}

// pods returns the names of the pods with label selector sel.
func (x tc) pods(sel string) []string {
	out, _ := x.c.Kubectl("get", "pods", "-l", sel, "-o", "jsonpath={.items[*].metadata.name}")
	return strings.Fields(out)
}

func (x tc) field(pod, path string) string {
	out, _ := x.c.Kubectl("get", "pod", pod, "-o", "jsonpath="+path)
	return out
}

// waitChecks waits until pod has printed its checks and returns its log.
func (x tc) waitChecks(pod string) string {
	x.Helper()
	var out string
	x.wait(3*time.Minute, "pod "+pod+" to run its checks", func() bool {
		switch r := x.field(pod, "{.status.containerStatuses[0].state.waiting.reason}"); r {
		case "CreateContainerError", "RunContainerError", "StartError", "CrashLoopBackOff":
			x.Fatalf("pod %s: %s: %s %s", pod, r, x.field(pod, "{.status.containerStatuses[0].state.waiting.message}"),
				x.field(pod, "{.status.containerStatuses[0].lastState.terminated.message}"))
		}
		out, _ = x.c.Kubectl("logs", pod)
		return strings.Contains(out, "checks-done")
	})
	return out
}

// pluginPod is the chart's pod on node.
func (x tc) pluginPod(node string) string {
	out, _ := x.c.Kubectl("-n", ns, "get", "pods", "-l", "app.kubernetes.io/name=wsl-gpu-hook",
		"--field-selector", "spec.nodeName="+node, "-o", "jsonpath={.items[*].metadata.name}")
	return out
}

// nodeFiles lists the files (not directories) in the node dirs the chart
// writes to. kubelet_internal_checkpoint is the kubelet's, written at the
// first plugin registration. Directories are left out: the kubelet makes
// the chart's hostPath dirs (DirectoryOrCreate) and never removes them, and
// a pod that mounts only its own dir cannot remove the mount point itself.
func (x tc) nodeFiles(n *cluster.Node) string {
	out, _ := n.Exec("sh", "-c", "find /var/lib/wsl-gpu-hook /var/run/cdi /var/lib/kubelet/device-plugins /var/lib/kubelet/plugins ! -type d 2>/dev/null | grep -v '/kubelet_internal_checkpoint$' | sort; true")
	return out
}

// testWSLGPU installs the chart with the device plugin and runs the cases a
// user would: per-node advertising and labels, CUDA in a Deployment, AMD on
// its node, Pending with the scheduler's reason, sharing, restarts, a
// driver update, CDI off, a vanished folder, and uninstall.
func testWSLGPU(t *testing.T, e env) {
	c := e.c.For(t)
	folders := e.folders
	x := tc{t, c}
	before := map[string]string{}
	for _, n := range c.Nodes() {
		before[n.Spec.Name] = x.nodeFiles(n)
	}

	t.Run("helm lint and template", func(t *testing.T) {
		c := c.For(t)
		if out, err := c.Helm("lint", chart); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		out, err := c.Helm("template", "wsl-gpu-hook", chart, "-n", ns, "--set", "image.tag=e2e")
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"kind: DaemonSet", "image: " + image, "--node-root=/host", "nvidia_resource = \"nvidia.com/gpu\""} {
			if !strings.Contains(out, want) {
				t.Errorf("rendered chart lacks %q", want)
			}
		}
		if _, err := c.Helm("template", "x", chart, "--set", "resources.nvidia=not a name"); err == nil || !strings.Contains(err.Error(), "is not an extended resource name") {
			t.Errorf("a bad resource name rendered: %v", err)
		}
		// The values schema refuses it before the template's own check.
		if _, err := c.Helm("template", "x", chart, "--set", "sharing.replicasPerAdapter=0"); err == nil || !strings.Contains(err.Error(), "at '/sharing/replicasPerAdapter': minimum: got 0, want 1") {
			t.Errorf("replicasPerAdapter 0 rendered: %v", err)
		}
	})

	if out, err := c.Helm("install", "wsl-gpu-hook", chart, "-n", ns, "--create-namespace",
		"--set", "image.tag=e2e", "--set", "interval=2s", "--wait", "--timeout", "5m"); err != nil {
		t.Fatalf("helm install: %v\n%s\n%s", err, out, c.Diagnose())
	}

	t.Run("each node advertises its adapters", func(t *testing.T) {
		c := c.For(t)
		x := tc{t, c}
		x.waitAllocatable("laptop", "nvidia.com/gpu", "1")
		x.waitAllocatable("laptop", "gpu.intel.com/dxg", "1")
		x.waitAllocatable("amd", "amd.com/gpu", "1")
		// The NPU is not a GPU (it used to be counted: gpu.intel.com/dxg 2).
		x.waitAllocatable("npu", "gpu.intel.com/dxg", "1")
		x.waitAllocatable("npu", "wsl-gpu-hook.dev/npu", "1")
		x.wait(time.Minute, "the laptop's GPU labels", func() bool {
			return x.label("laptop", "wsl-gpu-hook.dev/nvidia.count") == "1"
		})
		for k, v := range map[string]string{"wsl-gpu-hook.dev/wsl": "true", "wsl-gpu-hook.dev/vendors": "intel.nvidia",
			"wsl-gpu-hook.dev/nvidia.wddm": "3.0", "wsl-gpu-hook.dev/compute-only": "false", "wsl-gpu-hook.dev/nvidia.driver": nvidiaFolder} {
			if got := x.label("laptop", k); got != v {
				t.Errorf("laptop label %s = %q, want %q", k, got, v)
			}
		}
		x.wait(time.Minute, "the npu node's labels", func() bool { return x.label("npu", "wsl-gpu-hook.dev/compute-only") == "true" })
		for _, r := range []string{"nvidia.com/gpu", "amd.com/gpu", "gpu.intel.com/dxg"} {
			if got := x.allocatable("nodxg", r); got != "" {
				t.Errorf("node without /dev/dxg: allocatable %s = %q", r, got)
			}
		}
	})

	t.Run("node without /dev/dxg runs the plugin and says why once", func(t *testing.T) {
		c := c.For(t)
		x := tc{t, c}
		p := x.pluginPod("nodxg")
		x.wait(2*time.Minute, "the plugin on nodxg running", func() bool { return x.nsField(p, "{.status.phase}") == "Running" })
		time.Sleep(5 * time.Second) // a few intervals
		out, _ := c.Kubectl("-n", ns, "logs", p, "-c", "plugin")
		if n := strings.Count(out, "no GPU adapters can be listed"); n != 1 {
			t.Errorf("the plugin said why %d times, want once:\n%s", n, out)
		}
		if !strings.Contains(out, "/dev/dxg") {
			t.Errorf("the plugin's reason does not name /dev/dxg:\n%s", out)
		}
	})

	t.Run("Deployment with nvidia.com/gpu runs CUDA on the laptop", func(t *testing.T) {
		c := c.For(t)
		x := tc{t, c}
		c.Apply(deployment("cuda", "nvidia.com/gpu", 1))
		x.wait(2*time.Minute, "a cuda pod", func() bool { return len(x.pods("app=cuda")) == 1 })
		p := x.pods("app=cuda")[0]
		out := x.waitChecks(p)
		checkCUDA(t, out, nvidiaFolder)
		if node := x.field(p, "{.spec.nodeName}"); node != "laptop" {
			t.Errorf("the cuda pod runs on %s, want laptop", node)
		}
		if logs := c.MustKubectl("logs", "deploy/cuda"); !strings.Contains(logs, "cuInit(0) = 0") {
			t.Errorf("kubectl logs deploy/cuda:\n%s", logs)
		}
	})

	t.Run("the plugin serves the laptop's GPU metrics", func(t *testing.T) {
		c := c.For(t)
		x := tc{t, c}
		p := x.pluginPod("laptop")
		ip := x.nsField(p, "{.status.podIP}")
		if svc, _ := c.Kubectl("-n", ns, "get", "service", "wsl-gpu-hook-metrics", "-o", "jsonpath={.spec.clusterIP} {.spec.ports[0].port}"); svc != "None 9835" {
			t.Errorf("metrics service: %q, want headless on 9835", svc)
		}
		laptop := c.Node("laptop")
		scrape := func() string {
			out, err := laptop.Exec("busybox", "wget", "-q", "-O", "-", "http://"+ip+":9835/metrics")
			if err != nil {
				t.Fatalf("scrape %s: %v\n%s", ip, err, out)
			}
			return out
		}
		// The plugin samples every --metrics-interval (10 s); busy ratios
		// exist from its second sample on.
		out := scrape()
		for deadline := time.Now().Add(30 * time.Second); !strings.Contains(out, "wsl_gpu_engine_busy_ratio{") && time.Now().Before(deadline); {
			time.Sleep(2 * time.Second)
			out = scrape()
		}
		// The simulated laptop's modelled load: its RTX keeps compute 75%
		// busy, and has 6 GiB of local memory.
		for _, want := range []string{
			`wsl_gpu_adapter_info{description="NVIDIA GeForce RTX 3060 Laptop GPU",driver_version="32.0.15.6094",gpu="nvidia-2520-3a5c17aa-0",index="1",kind="gpu",luid="0x4486d1",vendor="nvidia"} 1`,
			`wsl_gpu_memory_total_bytes{gpu="nvidia-2520-3a5c17aa-0",group="local"} 6.442450944e+09`,
		} {
			if !strings.Contains(out, want) {
				t.Errorf("metrics lack %s:\n%s", want, out)
			}
		}
		var busy float64
		for _, line := range strings.Split(out, "\n") {
			if strings.HasPrefix(line, `wsl_gpu_engine_busy_ratio{gpu="nvidia-2520-3a5c17aa-0",kind="compute"`) {
				fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &busy)
			}
		}
		if busy < 0.7 || busy > 0.8 {
			t.Errorf("laptop compute busy ratio %v, want the modelled 0.75:\n%s", busy, out)
		}
	})

	t.Run("amd.com/gpu lands on the AMD node", func(t *testing.T) {
		c := c.For(t)
		x := tc{t, c}
		c.Apply(pod("rocm", "amd.com/gpu", 1))
		out := x.waitChecks("rocm")
		if node := x.field("rocm", "{.spec.nodeName}"); node != "amd" {
			t.Errorf("the amd pod runs on %s", node)
		}
		for _, want := range []string{"dxg-open", "folder " + amdFolder + "\n", "lib-readonly"} {
			if !strings.Contains(out, want) {
				t.Errorf("amd pod output lacks %q:\n%s", want, out)
			}
		}
		c.MustKubectl("delete", "pod", "rocm", "--wait=false")
	})

	t.Run("more GPUs than the cluster has stays Pending", func(t *testing.T) {
		c := c.For(t)
		x := tc{t, c}
		c.Apply(pod("greedy", "nvidia.com/gpu", 2))
		var msg string
		x.wait(time.Minute, "the scheduler's verdict on greedy", func() bool {
			msg = x.field("greedy", `{.status.conditions[?(@.type=="PodScheduled")].message}`)
			return msg != ""
		})
		if reason := x.field("greedy", `{.status.conditions[?(@.type=="PodScheduled")].reason}`); reason != "Unschedulable" || !strings.Contains(msg, "Insufficient nvidia.com/gpu") {
			t.Errorf("greedy: %s: %s", reason, msg)
		}
		t.Logf("scheduler: %s", msg)
		c.MustKubectl("delete", "pod", "greedy", "--wait=false")
	})

	t.Run("sharing: N pods share one adapter, the N+1st waits", func(t *testing.T) {
		c := c.For(t)
		x := tc{t, c}
		c.MustKubectl("scale", "deploy/cuda", "--replicas=0")
		x.wait(time.Minute, "cuda scaled to 0", func() bool { return len(x.pods("app=cuda")) == 0 })
		if out, err := c.Helm("upgrade", "wsl-gpu-hook", chart, "-n", ns, "--reuse-values", "--set", "sharing.replicasPerAdapter=2", "--wait", "--timeout", "3m"); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		x.waitAllocatable("laptop", "nvidia.com/gpu", "2")
		c.MustKubectl("scale", "deploy/cuda", "--replicas=3")
		var running, pending []string
		x.wait(3*time.Minute, "2 cuda pods running and 1 pending", func() bool {
			running, pending = nil, nil
			for _, p := range x.pods("app=cuda") {
				switch x.field(p, "{.status.phase}") {
				case "Running":
					if out, _ := c.Kubectl("logs", p); strings.Contains(out, "checks-done") {
						running = append(running, p)
					}
				case "Pending":
					if strings.Contains(x.field(p, `{.status.conditions[?(@.type=="PodScheduled")].message}`), "Insufficient nvidia.com/gpu") {
						pending = append(pending, p)
					}
				}
			}
			return len(running) == 2 && len(pending) == 1
		})
		for _, p := range running {
			out, _ := c.Kubectl("logs", p)
			checkCUDA(t, out, nvidiaFolder)
		}
		c.MustKubectl("scale", "deploy/cuda", "--replicas=2")
		x.wait(time.Minute, "2 cuda pods", func() bool { return len(x.pods("app=cuda")) == 2 })
	})

	// What the running GPU pods must survive.
	state := func() string {
		var b strings.Builder
		for _, p := range x.pods("app=cuda") {
			fmt.Fprintf(&b, "%s %s %s %s\n", p, x.field(p, "{.status.phase}"), x.field(p, "{.status.containerStatuses[0].containerID}"), x.field(p, "{.status.containerStatuses[0].restartCount}"))
		}
		return b.String()
	}
	t.Run("restarts: plugin pod, kubelet, containerd", func(t *testing.T) {
		c := c.For(t)
		x := tc{t, c}
		laptop := c.Node("laptop")
		want := state()
		if strings.Count(want, " Running ") != 2 {
			t.Fatalf("cuda pods before the restarts:\n%s", want)
		}
		for _, step := range []struct {
			name string
			do   func() error
		}{
			{"plugin pod deleted", func() error {
				_, err := c.Kubectl("-n", ns, "delete", "pod", x.pluginPod("laptop"))
				return err
			}},
			{"kubelet restarted", func() error { return laptop.Restart("kubelet") }},
			{"containerd restarted", func() error { return laptop.Restart("containerd") }},
		} {
			if err := step.do(); err != nil {
				t.Fatalf("%s: %v", step.name, err)
			}
			x.wait(2*time.Minute, step.name+": laptop Ready with nvidia.com/gpu back", func() bool {
				ready, _ := c.Kubectl("get", "node", "laptop", "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
				p := x.pluginPod("laptop")
				return ready == "True" && p != "" && x.nsField(p, `{.status.conditions[?(@.type=="Ready")].status}`) == "True" &&
					x.allocatable("laptop", "nvidia.com/gpu") == "2"
			})
			if got := state(); got != want {
				t.Errorf("%s: the GPU pods changed:\n%s\nwant\n%s", step.name, got, want)
			}
		}
		// The resource is usable again, not just counted.
		c.Apply(pod("after-restarts", "nvidia.com/gpu", 1))
		x.wait(2*time.Minute, "after-restarts pending for want of a GPU", func() bool {
			return strings.Contains(x.field("after-restarts", `{.status.conditions[?(@.type=="PodScheduled")].message}`), "Insufficient nvidia.com/gpu")
		})
		c.MustKubectl("scale", "deploy/cuda", "--replicas=1")
		checkCUDA(t, x.waitChecks("after-restarts"), nvidiaFolder)
		c.MustKubectl("delete", "pod", "after-restarts", "--wait=false")
	})

	t.Run("Windows driver update under running pods", func(t *testing.T) {
		c := c.For(t)
		x := tc{t, c}
		updateNVIDIADriver(t, c.Node("laptop").HostTree, folders)
		c.Apply(pod("after-update", "nvidia.com/gpu", 1))
		checkCUDA(t, x.waitChecks("after-update"), updated)
		if got := strings.Count(state(), " Running "); got != 1 {
			t.Errorf("the pod started before the update stopped running:\n%s", state())
		}
		c.MustKubectl("delete", "pod", "after-update", "--wait=false")
	})

	t.Run("a driver folder vanishing: that adapter's devices turn unhealthy", func(t *testing.T) {
		c := c.For(t)
		x := tc{t, c}
		drivers := filepath.Join(c.Node("amd").HostTree, "usr/lib/wsl/drivers")
		before := x.allocatable("amd", "amd.com/gpu") // each replica of the one adapter
		if before == "0" || before == "" {
			t.Fatalf("amd allocatable amd.com/gpu = %q before the folder goes", before)
		}
		if err := os.Rename(filepath.Join(drivers, amdFolder), filepath.Join(drivers, amdFolder+".gone")); err != nil {
			t.Fatal(err)
		}
		x.waitAllocatable("amd", "amd.com/gpu", "0")
		if err := os.Rename(filepath.Join(drivers, amdFolder+".gone"), filepath.Join(drivers, amdFolder)); err != nil {
			t.Fatal(err)
		}
		x.waitAllocatable("amd", "amd.com/gpu", before)
	})

	t.Run("Allocate without CDI: the device, mounts and env still reach the pod", func(t *testing.T) {
		c := c.For(t)
		x := tc{t, c}
		if out, err := c.Helm("upgrade", "wsl-gpu-hook", chart, "-n", ns, "--reuse-values", "--set", "cdi=false", "--wait", "--timeout", "3m"); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		// The plugin restarted with the new configuration and advertises
		// again; the old answers are gone with its old pod.
		x.wait(2*time.Minute, "the laptop's plugin running with cdi = false", func() bool {
			p := x.pluginPod("laptop")
			out, _ := c.Kubectl("-n", ns, "logs", p, "-c", "plugin")
			return !strings.Contains(p, " ") && strings.Contains(out, "cdi=false") && x.allocatable("laptop", "nvidia.com/gpu") == "2"
		})
		// No CDI device, so no hook: no loader cache, no nvidia-smi; the
		// plugin's own answer gives /dev/dxg, the lib dir and the folder
		// read-only, and the adapters' LUIDs in WSL_GPU_DEVICES.
		c.Apply(strings.Replace(pod("nocdi", "nvidia.com/gpu", 1), strconv.Quote(gpuScript),
			strconv.Quote("echo devices=$WSL_GPU_DEVICES; [ -e /usr/bin/nvidia-smi ] && echo HOOK-RAN || echo no-hook\n"+
				"LD_LIBRARY_PATH=/usr/lib/wsl/lib cudaprobe\n"+gpuScript), 1))
		out := x.waitChecks("nocdi")
		folder := nvidiaFolder // as the driver update case left it
		if _, err := os.Stat(filepath.Join(c.Node("laptop").HostTree, "usr/lib/wsl/drivers", updated)); err == nil {
			folder = updated
		}
		for _, want := range []string{"dxg-open", "folder " + folder + "\n", "lib-readonly", "devices=0x4486d1", "no-hook", "cuInit(0) = 0"} {
			if !strings.Contains(out, want) {
				t.Errorf("nocdi pod output lacks %q:\n%s", want, out)
			}
		}
		if n := strings.Count(out, "folder "); n != 1 {
			t.Errorf("%d driver folders in the nocdi pod, want 1:\n%s", n, out)
		}
		x.deletePods("nocdi")
	})

	t.Run("helm uninstall leaves nothing on the nodes", func(t *testing.T) {
		c := c.For(t)
		x := tc{t, c}
		c.MustKubectl("delete", "deploy/cuda")
		if out, err := c.Helm("uninstall", "wsl-gpu-hook", "-n", ns, "--wait", "--timeout", "3m"); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		x.wait(2*time.Minute, "the plugin pods gone", func() bool {
			out, _ := c.Kubectl("-n", ns, "get", "pods", "-o", "name")
			return out == ""
		})
		// The chart's labels are gone from every node (its post-delete
		// Job: the plugin pods lose their RBAC before they stop), and
		// the harness's own wsl-gpu-hook.dev/test-node label stays.
		for _, n := range c.Nodes() {
			out := c.MustKubectl("get", "node", n.Spec.Name, "-o", `go-template={{range $k, $v := .metadata.labels}}{{$k}}={{$v}}{{"\n"}}{{end}}`)
			var left []string
			for _, l := range strings.Split(out, "\n") {
				if strings.HasPrefix(l, "wsl-gpu-hook.dev/") && l != "wsl-gpu-hook.dev/test-node="+n.Spec.Name {
					left = append(left, l)
				}
			}
			if len(left) > 0 || !strings.Contains(out, "wsl-gpu-hook.dev/test-node="+n.Spec.Name) {
				t.Errorf("node %s after uninstall: the chart's labels %v are left (or the harness's test-node label is gone):\n%s", n.Spec.Name, left, out)
			}
		}
		if out, _ := c.Kubectl("get", "clusterroles,clusterrolebindings,jobs,serviceaccounts", "-A", "-o", "name"); strings.Contains(out, "node-labels-cleanup") {
			t.Errorf("the cleanup Job's objects outlive it:\n%s", out)
		}
		for _, n := range c.Nodes() {
			if got := x.nodeFiles(n); got != before[n.Spec.Name] {
				t.Errorf("node %s after uninstall:\n%s\nbefore install:\n%s", n.Spec.Name, got, before[n.Spec.Name])
			}
		}
	})
}
