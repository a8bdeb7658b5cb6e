package cluster

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestTwoNodes brings up the control plane and two nodes, the second
// k3s-shaped (NodeSpec.K3s), and runs a pod on each through the scheduler:
// the pod network, kubectl logs through the kubelets, and the kubernetes
// Service's address reached from a pod.
func TestTwoNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a cluster")
	}
	c := Start(t, Options{Nodes: []NodeSpec{{Name: "a", Profile: "nvidia-laptop"}, {Name: "b", K3s: true}}})
	if out := c.MustKubectl("version", "-o", "json"); !strings.Contains(out, `"gitVersion": "v1.37.2"`) {
		t.Errorf("kubectl version does not say v1.37.2:\n%s", out)
	}
	// b runs its containerd and kubelet as a k3s agent does, and no other.
	b := c.Node("b")
	out, _ := b.Exec("sh", "-c", `[ -S /run/k3s/containerd/containerd.sock ] && [ -f /var/lib/rancher/k3s/agent/etc/containerd/config.toml ] && [ ! -e /run/containerd ] && echo k3s-shaped`)
	kubelet, _ := os.ReadFile(filepath.Join(b.Dir, "kubelet.yaml"))
	if out != "k3s-shaped\n" || !strings.Contains(string(kubelet), "containerRuntimeEndpoint: unix:///run/k3s/containerd/containerd.sock\n") {
		t.Errorf("node b is not k3s-shaped: %q; its kubelet's configuration:\n%s", out, kubelet)
	}
	for _, node := range []string{"a", "b"} {
		c.Apply(`apiVersion: v1
kind: Pod
metadata: {name: hello-` + node + `}
spec:
  nodeName: ` + node + `
  restartPolicy: Never
  containers:
  - name: main
    image: ` + TestImage + `
    imagePullPolicy: Never
    command: ["sh", "-c", "ip -4 addr show eth0 | grep -o 'inet [0-9.]*'; nc -w 3 ` + ServiceIP + ` 443 </dev/null 2>/tmp/e; if [ -s /tmp/e ]; then cat /tmp/e; else echo api-reachable; fi; echo hello from $(hostname)"]
`)
	}
	for _, node := range []string{"a", "b"} {
		c.WaitFor(2*time.Minute, "pod hello-"+node+" to succeed", func() bool {
			out, _ := c.Kubectl("get", "pod", "hello-"+node, "-o", "jsonpath={.status.phase}")
			return out == "Succeeded"
		})
		out := c.MustKubectl("logs", "hello-"+node)
		for _, want := range []string{"inet 10.244.", "api-reachable", "hello from hello-" + node} {
			if !strings.Contains(out, want) {
				t.Errorf("pod on node %s: logs lack %q:\n%s", node, want, out)
			}
		}
	}
}
