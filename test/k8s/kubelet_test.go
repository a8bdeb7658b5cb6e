package k8s

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// gpuPod is shaped like the public charts' GPU workloads: a limit on
// nvidia.com/gpu, no annotation, no runtimeClassName. hostNetwork only
// because this node has no CNI plugin.
func gpuPod(name, resource string, n int) string {
	return `apiVersion: v1
kind: Pod
metadata:
  name: ` + name + `
spec:
  hostNetwork: true
  restartPolicy: Never
  containers:
    - name: main
      image: docker.io/library/wslgpu-test:latest
      imagePullPolicy: Never
      command: ["sh", "-c"]
      args:
        - |
          : <> /dev/dxg && echo dxg-open
          ls /usr/lib/wsl/drivers | sed 's/^/folder /'
          cudaprobe
          touch /usr/lib/wsl/lib/x 2>/dev/null && echo LIB-WRITABLE || echo lib-readonly
          echo "request WSL_GPU_DEVICES=$WSL_GPU_DEVICES"
          echo checks-done
          exec sleep 3600
      resources:
        limits:
          ` + resource + `: ` + itoa(n) + `
`
}

// checkGPU asserts what a user checks inside the container: /dev/dxg
// opens, libcuda.so.1 loads from the lib dir with no LD_LIBRARY_PATH and
// cuInit works, the lib dir is read-only, and exactly the NVIDIA driver
// folder is there.
func checkGPU(t *testing.T, out, nvidiaFolder string) {
	t.Helper()
	for _, want := range []string{"dxg-open", "cudaprobe: loaded /usr/lib/wsl/lib/libcuda.so.1", "cudaprobe: cuInit(0) = 0", "lib-readonly", "folder " + nvidiaFolder + "\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("container output lacks %q:\n%s", want, out)
		}
	}
	if c := strings.Count(out, "folder "); c != 1 {
		t.Errorf("%d driver folders in the container, want only the NVIDIA one:\n%s", c, out)
	}
}

// waitRunning waits until the pod's container has printed its checks.
func (n *node) waitRunning(t *testing.T, name string) (pod, string) {
	t.Helper()
	var p pod
	var out string
	waitFor(t, 3*time.Minute, "pod "+name+" to run its checks", func() bool {
		var ok bool
		p, ok = n.pods()[name]
		if !ok {
			return false
		}
		if p.Status.Phase == "Failed" {
			t.Fatalf("pod %s failed: %s: %s\nkubelet:\n%s", name, p.Status.Reason, p.Status.Message, tail(n.kubelet.log.String(), 30))
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.State.Waiting != nil && cs.State.Waiting.Reason == "CreateContainerError" || cs.State.Waiting != nil && cs.State.Waiting.Reason == "RunContainerError" {
				t.Fatalf("pod %s: %s: %s", name, cs.State.Waiting.Reason, cs.State.Waiting.Message)
			}
		}
		out = n.containerLog(p, "main")
		return strings.Contains(out, "checks-done")
	}, n.kubelet, n.containerd, n.plugin)
	return p, out
}

const nvidiaDeviceID = "nvidia-10de-2520-3a5c17aa-nvltwi.inf_amd64-0"

// TestKubelet runs a real kubelet (built from k8s.io/kubernetes) standalone
// with containerd 2.4 (CDI on) and the device plugin on the simulated
// NVIDIA laptop (Intel iGPU + NVIDIA dGPU), and checks what an operator
// and a pod would see.
func TestKubelet(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a kubelet")
	}
	e := setup(t)
	n := newNode(t, e)
	n.startContainerd(t)
	n.writeCDISpec(t)
	n.startPlugin(t)
	n.startKubelet(t)

	waitFor(t, 3*time.Minute, "the kubelet to list nvidia.com/gpu from the plugin", func() bool {
		return reflect.DeepEqual(n.allocatable(t, "nvidia.com/gpu"), []string{nvidiaDeviceID})
	}, n.kubelet, n.plugin, n.containerd)
	if got := n.allocatable(t, "gpu.intel.com/dxg"); len(got) != 1 {
		t.Errorf("allocatable gpu.intel.com/dxg = %v, want the iGPU", got)
	}
	features, err := os.ReadFile(filepath.Join(e.dir, "features.d", "wsl-gpu-hook"))
	if err != nil || !strings.Contains(string(features), "wsl-gpu-hook.nvidia.count=1\n") || !strings.Contains(string(features), "wsl-gpu-hook.present=true\n") {
		t.Errorf("node feature file: %v\n%s", err, features)
	}

	t.Run("chart pod with 1 nvidia.com/gpu runs CUDA", func(t *testing.T) {
		n.addPod(t, "cuda", gpuPod("cuda", "nvidia.com/gpu", 1))
		_, out := n.waitRunning(t, "cuda")
		checkGPU(t, out, e.nvidia)
		// The CDI spec's edits come after the plugin's env: its
		// WSL_GPU_DEVICES=void keeps a hook in the runtime from injecting twice.
		if !strings.Contains(out, "request WSL_GPU_DEVICES=void") {
			t.Errorf("the CDI spec's env did not reach the container (were the CDI names applied?):\n%s", out)
		}
		if got := n.assigned(t, "cuda", "nvidia.com/gpu"); !reflect.DeepEqual(got, []string{nvidiaDeviceID}) {
			t.Errorf("pod holds %v, want %s", got, nvidiaDeviceID)
		}
	})

	t.Run("more GPUs than exist is not admitted", func(t *testing.T) {
		n.addPod(t, "greedy", gpuPod("greedy", "nvidia.com/gpu", 2))
		var p pod
		waitFor(t, 2*time.Minute, "the kubelet to reject pod greedy", func() bool {
			var ok bool
			p, ok = n.pods()["greedy"]
			return ok && p.Status.Phase == "Failed"
		}, n.kubelet)
		if !strings.Contains(p.Status.Message, "nvidia.com/gpu") || !strings.Contains(p.Status.Message, "Requested: 2") {
			t.Errorf("rejection says %s: %q, want it to name nvidia.com/gpu and the 2 requested", p.Status.Reason, p.Status.Message)
		}
		t.Logf("kubelet: %s: %s", p.Status.Reason, p.Status.Message)
		n.removePod(t, "greedy")
	})

	t.Run("adapter folder removed turns the device unhealthy", func(t *testing.T) {
		folder := filepath.Join(e.driversDir, e.nvidia)
		if err := os.Rename(folder, folder+".away"); err != nil {
			t.Fatal(err)
		}
		restored := false
		defer func() {
			if !restored {
				os.Rename(folder+".away", folder)
			}
		}()
		waitFor(t, time.Minute, "allocatable nvidia.com/gpu to drop to 0", func() bool {
			got := n.allocatable(t, "nvidia.com/gpu")
			return got != nil && len(got) == 0
		}, n.kubelet, n.plugin)
		if !strings.Contains(n.plugin.log.String(), nvidiaDeviceID+": unhealthy: adapter 1") {
			t.Errorf("the plugin's log does not say why the device is unhealthy:\n%s", tail(n.plugin.log.String(), 10))
		}
		if got := n.allocatable(t, "gpu.intel.com/dxg"); len(got) != 1 {
			t.Errorf("the iGPU went too: allocatable gpu.intel.com/dxg = %v", got)
		}
		if err := os.Rename(folder+".away", folder); err != nil {
			t.Fatal(err)
		}
		restored = true
		waitFor(t, time.Minute, "allocatable nvidia.com/gpu back to 1", func() bool {
			return reflect.DeepEqual(n.allocatable(t, "nvidia.com/gpu"), []string{nvidiaDeviceID})
		}, n.kubelet, n.plugin)
	})

	t.Run("plugin restart keeps the device IDs", func(t *testing.T) {
		n.plugin.stop()
		// The kubelet marks a disconnected plugin's devices unhealthy.
		waitFor(t, time.Minute, "allocatable nvidia.com/gpu to drop with the plugin gone", func() bool {
			got := n.allocatable(t, "nvidia.com/gpu")
			return got != nil && len(got) == 0
		}, n.kubelet)
		n.startPlugin(t)
		waitFor(t, time.Minute, "the same device back", func() bool {
			return reflect.DeepEqual(n.allocatable(t, "nvidia.com/gpu"), []string{nvidiaDeviceID})
		}, n.kubelet, n.plugin)
	})

	t.Run("without CDI names the device, mounts and env still arrive", func(t *testing.T) {
		// What a runtime without CDI gets: the answer's device node, mounts
		// and the hook's request variable. Nothing registers the libraries
		// with the loader (no hook in this runtime), so CUDA does not load:
		// that is the RuntimeClass path's job.
		n.removePod(t, "cuda")
		noCDI := n.e.config + ".nocdi"
		data, _ := os.ReadFile(n.e.config)
		if err := os.WriteFile(noCDI, append(data, "[device_plugin]\ncdi = false\n"...), 0o644); err != nil {
			t.Fatal(err)
		}
		n.plugin.stop()
		n.startPluginWith(t, noCDI)
		defer func() { n.plugin.stop(); n.startPlugin(t) }()
		waitFor(t, time.Minute, "the plugin without CDI registered", func() bool {
			return strings.Contains(n.plugin.log.String(), `msg="registered with the kubelet" resource=nvidia.com/gpu`)
		}, n.plugin)
		n.addPod(t, "no-cdi", gpuPod("no-cdi", "nvidia.com/gpu", 1))
		_, out := n.waitRunning(t, "no-cdi")
		for _, want := range []string{"dxg-open", "folder " + e.nvidia + "\n", "lib-readonly", "request WSL_GPU_DEVICES=0x4486d1"} {
			if !strings.Contains(out, want) {
				t.Errorf("container output lacks %q:\n%s", want, out)
			}
		}
		if strings.Contains(out, "cuInit(0) = 0") {
			t.Errorf("CUDA loaded with no CDI and no hook: this case no longer shows the non-CDI answer alone:\n%s", out)
		}
		n.removePod(t, "no-cdi")
	})

	t.Run("kubelet restart: the plugin registers again", func(t *testing.T) {
		before := strings.Count(n.plugin.log.String(), `msg="registered with the kubelet" resource=nvidia.com/gpu`)
		n.kubelet.stop()
		n.startKubelet(t)
		waitFor(t, 3*time.Minute, "the plugin to register again", func() bool {
			return strings.Count(n.plugin.log.String(), `msg="registered with the kubelet" resource=nvidia.com/gpu`) > before
		}, n.kubelet, n.plugin)
		if !strings.Contains(n.plugin.log.String(), "kubelet.sock recreated") {
			t.Errorf("the plugin did not notice the restart:\n%s", tail(n.plugin.log.String(), 10))
		}
		// Allocate needs the new registration: a checkpointed endpoint alone
		// cannot answer it.
		n.addPod(t, "cuda-again", gpuPod("cuda-again", "nvidia.com/gpu", 1))
		_, out := n.waitRunning(t, "cuda-again")
		checkGPU(t, out, e.nvidia)
		n.removePod(t, "cuda-again")
	})
}
