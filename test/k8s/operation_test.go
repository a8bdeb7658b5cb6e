package k8s

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/k8s/cluster"
)

// restartScript is a GPU workload whose container checks the GPU, prints
// the checks and exits, so the kubelet starts it again (and again): each
// start is a new container, which needs its CDI spec and the hook the spec
// names to be on the node at that moment.
const restartScript = `: <> /dev/dxg && echo dxg-open
cudaprobe
touch /usr/lib/wsl/lib/x 2>/dev/null && echo LIB-WRITABLE || echo lib-readonly
echo checks-done
sleep 2`

// restarter is a pod that asks for its GPU through resources (the device
// plugin: "limits: {nvidia.com/gpu: 1}") or a claim template (DRA:
// "claim: TEMPLATE"), and restarts its container forever.
func restarter(name, ask string) string {
	resources := "limits: {nvidia.com/gpu: 1}"
	claims := ""
	if tmpl, ok := strings.CutPrefix(ask, "claim: "); ok {
		resources = "claims: [{name: gpu}]"
		claims = "  resourceClaims:\n  - name: gpu\n    resourceClaimTemplateName: " + tmpl + "\n"
	}
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
  terminationGracePeriodSeconds: 1
  nodeSelector: {kubernetes.io/hostname: laptop}
%s  containers:
  - name: main
    image: %s
    imagePullPolicy: Never
    command: ["sh", "-c", %s]
    resources:
      %s
`, name, claims, cluster.TestImage, strconv.Quote(restartScript), resources)
}

// restarts is a pod's container restart count, -1 when unknown.
func (x tc) restarts(pod string) int {
	n, err := strconv.Atoi(x.field(pod, "{.status.containerStatuses[0].restartCount}"))
	if err != nil {
		return -1
	}
	return n
}

// keepsRestarting waits until each pod's container has been started again
// twice more than from, each run printing its checks, and fails at the
// first start the runtime refused (the CDI spec or the hook missing).
func (x tc) keepsRestarting(step string, from map[string]int) {
	x.Helper()
	for pod, n := range from {
		x.wait(2*time.Minute, fmt.Sprintf("%s: pod %s restarting twice more than %d times", step, pod, n), func() bool {
			switch r := x.field(pod, "{.status.containerStatuses[0].state.waiting.reason}"); r {
			case "CreateContainerError", "RunContainerError", "StartError", "CreateContainerConfigError":
				x.Fatalf("%s: pod %s: %s: %s", step, pod, r, x.field(pod, "{.status.containerStatuses[0].state.waiting.message}"))
			}
			if code := x.field(pod, "{.status.containerStatuses[0].lastState.terminated.exitCode}"); code != "" && code != "0" {
				x.Fatalf("%s: pod %s: its last container exited %s: %s", step, pod, code, x.field(pod, "{.status.containerStatuses[0].lastState.terminated.message}"))
			}
			return x.restarts(pod) >= n+2
		})
		// The container that just exited; the kubelet may still be
		// replacing it when the count moves.
		var out string
		for i := 0; i < 20; i++ {
			if out, _ = x.c.Kubectl("logs", "--previous", pod); strings.Contains(out, "checks-done") {
				break
			}
			time.Sleep(250 * time.Millisecond)
		}
		for _, want := range []string{"dxg-open", "cudaprobe: cuInit(0) = 0", "lib-readonly", "checks-done"} {
			if !strings.Contains(out, want) {
				x.Errorf("%s: pod %s's last run lacks %q:\n%s", step, pod, want, out)
			}
		}
	}
}

// nodeWatch polls files of a node's, through its mount namespace, every
// few milliseconds and records each moment one was missing: a restart of
// the node pod must never take away, even for an instant, what running
// pods need.
type nodeWatch struct {
	mu      sync.Mutex
	missing []string
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
}

// A test that fails before take stops the watch at its cleanup.
func watchFiles(t *testing.T, n *cluster.Node, files []string) *nodeWatch {
	w := &nodeWatch{stop: make(chan struct{}), done: make(chan struct{})}
	t.Cleanup(func() { w.take() })
	go func() {
		defer close(w.done)
		for {
			for _, f := range files {
				if _, err := os.Stat(n.Path(f)); err != nil {
					w.mu.Lock()
					w.missing = append(w.missing, time.Now().Format("15:04:05.000")+" "+f)
					w.mu.Unlock()
				}
			}
			select {
			case <-w.stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return w
}

// take stops the watch and returns what it saw missing; again, it
// returns the same.
func (w *nodeWatch) take() []string {
	w.once.Do(func() { close(w.stop) })
	<-w.done
	return w.missing
}

// testOperation runs what operators do to a running installation while
// pods asking nvidia.com/gpu: 1 (one given it by the device plugin before
// the switch to DRA, one by the driver after) and a pod with a claim
// restart their containers every few seconds on the laptop: a helm
// upgrade with a changed value, the node pod deleted, a rollout restart,
// the plugin's and the driver's containers killed as the OOM killer kills
// (SIGKILL: no signal handler runs). The pods must keep restarting and
// nothing they need may vanish from the node at any moment; helm uninstall then leaves no file of the project. It
// also holds the admission policies: the plugin's own token, as root on
// the node could read it, is refused another node, a foreign label, a
// taint and another node's ResourceSlice.
func testOperation(t *testing.T, e env) {
	c := e.c.For(t)
	x := tc{t, c}
	laptop := c.Node("laptop")
	before := map[string]string{}
	for _, n := range c.Nodes() {
		before[n.Spec.Name] = x.nodeFiles(n)
	}

	t.Run("values the schema refuses", func(t *testing.T) {
		c := c.For(t)
		for _, tc := range []struct{ set, want string }{
			{"nodeSetup.hookDir=/etc", "/nodeSetup/hookDir"},
			{"nodeSetup.hookDir=/var/lib/../etc", "/nodeSetup/hookDir"},
			{"nodeSetup.cdiDir=/tmp/cdi", "/nodeSetup/cdiDir"},
			{"metrics.port=70000", "/metrics/port"},
			{"image.digest=latest", "/image/digest"},
			{"nodesetup.hookDir=/var/lib/x", "nodesetup"},
		} {
			_, err := c.Helm("template", "x", chart, "--set", tc.set)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("--set %s: %v, want a schema error at %s", tc.set, err, tc.want)
			}
		}
		out, err := c.Helm("template", "x", chart, "--set", "image.digest=sha256:"+strings.Repeat("ab", 32))
		if err != nil || !strings.Contains(out, "image: localhost/wsl-gpu-hook@sha256:abab") {
			t.Errorf("image.digest: %v\n%s", err, out)
		}
	})

	t.Run("the pods mount only what they need", func(t *testing.T) {
		c := c.For(t)
		out, err := c.Helm("template", "x", chart, "--set", "dra.enabled=true")
		if err != nil {
			t.Fatal(err)
		}
		for _, bad := range []string{"path: /var/lib,", "path: /var/run,", "path: /var/lib/kubelet/plugins,", "mountPath: /host/var/lib}", "mountPath: /host/var/run}"} {
			if strings.Contains(out, bad) {
				t.Errorf("the chart still mounts a whole node dir (%q)", bad)
			}
		}
	})

	if out, err := c.Helm("install", "wsl-gpu-hook", chart, "-n", ns, "--create-namespace",
		"--set", "image.tag=e2e", "--set", "interval=2s", "--wait", "--timeout", "5m"); err != nil {
		t.Fatalf("helm install: %v\n%s\n%s", err, out, c.Diagnose())
	}
	x.waitAllocatable("laptop", "nvidia.com/gpu", "1")
	c.Apply(restarter("dp-restarter", "limits"))
	x.keepsRestarting("device plugin pod started", map[string]int{"dp-restarter": 0})

	// What the running pods need on the node, watched through every step.
	// /run, not /var/run: the node's /var/run is a link to /run, which
	// through /proc/PID/root would resolve to the host's.
	static := []string{"/var/lib/wsl-gpu-hook/wsl-gpu-hook", "/run/cdi/nvidia.com-gpu_wsl-gpu-hook.json", "/run/cdi/wsl-gpu-hook.dev-gpu.json"}
	w := watchFiles(t, laptop, static)

	// A changed value: the DaemonSet rolls its pods, now with the DRA
	// driver (and the device plugin advertising nothing): the running
	// device-plugin pod keeps what it was given, beyond the kubelet's 5
	// minutes. The kubelet forgets a resource's endpoint 5 minutes after
	// its last plugin went (endpointStopGracePeriod) and then refuses
	// every container start of a pod holding it ("endpoint not found in
	// cache for a registered resource: nvidia.com/gpu"), also of pods the
	// DRA driver serves under that name: so the plugin keeps its names
	// registered with no device (--hold-resources). What shows it at once,
	// not 5 minutes later: the node's capacity of nvidia.com/gpu is 0 (a
	// live endpoint listing no device), not 1 (a gone plugin's devices,
	// counted unhealthy until the kubelet forgets them). A pod asking
	// nvidia.com/gpu: 1 now is served by the driver (the DeviceClass's
	// extended resource); all three pods restart through every step below.
	if out, err := c.Helm("upgrade", "wsl-gpu-hook", chart, "-n", ns, "--reuse-values", "--set", "dra.enabled=true", "--wait", "--timeout", "3m"); err != nil {
		t.Fatalf("helm upgrade to DRA: %v\n%s", err, out)
	}
	x.waitDevices("laptop", nvDevice, igDevice)
	x.wait(time.Minute, "the laptop's nvidia.com/gpu capacity 0: the plugin's endpoint registered with no device", func() bool {
		out, _ := c.Kubectl("get", "node", "laptop", "-o", `jsonpath={.status.capacity.nvidia\.com/gpu}`)
		return out == "0"
	})
	x.keepsRestarting("helm upgrade --set dra.enabled=true", map[string]int{"dp-restarter": x.restarts("dp-restarter")})
	c.Apply(restarter("xr-restarter", "limits"))
	x.keepsRestarting("nvidia.com/gpu pod started with DRA on", map[string]int{"xr-restarter": 0})
	if claim := x.field("xr-restarter", "{.status.extendedResourceClaimStatus.resourceClaimName}"); claim == "" {
		t.Fatalf("xr-restarter has no extendedResourceClaimStatus: its nvidia.com/gpu did not come from the DRA driver")
	}
	c.Apply(claimTemplate("op-nvidia", "gpu.wsl-gpu-hook.dev", nvSel, 1))
	c.Apply(restarter("dra-restarter", "claim: op-nvidia"))
	x.keepsRestarting("DRA pod started", map[string]int{"dra-restarter": 0})
	// One claim spec per pod: the claim's, and the one the scheduler
	// made for xr-restarter's nvidia.com/gpu.
	specs := strings.Fields(claimSpecs(laptop))
	if len(specs) != 2 {
		t.Fatalf("the claim specs on the laptop: %q, want the two pods' claims", specs)
	}
	if missing := w.take(); len(missing) > 0 {
		t.Errorf("files the running pods need vanished during the upgrade:\n%s", strings.Join(missing, "\n"))
	}
	watched := slices.Clone(static)
	for _, f := range specs {
		watched = append(watched, "/run/cdi/"+f)
	}
	w = watchFiles(t, laptop, watched)

	pluginPodReady := func(old string) func() bool {
		return func() bool {
			p := x.pluginPod("laptop")
			return p != "" && !strings.Contains(p, " ") && (old == "" || p != old) &&
				x.nsField(p, `{.status.conditions[?(@.type=="Ready")].status}`) == "True"
		}
	}
	// kill SIGKILLs a container of the laptop's node pod, as the OOM
	// killer does, and waits for the kubelet to start it again.
	kill := func(container string) error {
		p := x.pluginPod("laptop")
		before := x.nsField(p, `{.status.containerStatuses[?(@.name=="`+container+`")].restartCount}`)
		id := x.nsField(p, `{.status.containerStatuses[?(@.name=="`+container+`")].containerID}`)
		id = strings.TrimPrefix(id, "containerd://")
		if id == "" {
			return fmt.Errorf("no %s container in %s", container, p)
		}
		if out, err := laptop.Ctr("tasks", "kill", "--signal", "SIGKILL", id); err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		x.wait(2*time.Minute, container+" started again", func() bool {
			return x.nsField(p, `{.status.containerStatuses[?(@.name=="`+container+`")].restartCount}`) != before && pluginPodReady("")()
		})
		return nil
	}
	for _, step := range []struct {
		name string
		do   func() error
	}{
		{"node pod deleted", func() error {
			old := x.pluginPod("laptop")
			if _, err := c.Kubectl("-n", ns, "delete", "pod", old); err != nil {
				return err
			}
			x.wait(2*time.Minute, "a new node pod ready", pluginPodReady(old))
			return nil
		}},
		{"helm upgrade with a changed value", func() error {
			old := x.pluginPod("laptop")
			if out, err := c.Helm("upgrade", "wsl-gpu-hook", chart, "-n", ns, "--reuse-values", "--set", "logLevel=debug", "--wait", "--timeout", "3m"); err != nil {
				return fmt.Errorf("%v: %s", err, out)
			}
			x.wait(2*time.Minute, "a new node pod ready", pluginPodReady(old))
			return nil
		}},
		{"kubectl rollout restart", func() error {
			old := x.pluginPod("laptop")
			if _, err := c.Kubectl("-n", ns, "rollout", "restart", "daemonset/wsl-gpu-hook"); err != nil {
				return err
			}
			if _, err := c.Kubectl("-n", ns, "rollout", "status", "daemonset/wsl-gpu-hook", "--timeout=3m"); err != nil {
				return err
			}
			x.wait(2*time.Minute, "a new node pod ready", pluginPodReady(old))
			return nil
		}},
		{"plugin container killed (SIGKILL, as the OOM killer)", func() error { return kill("plugin") }},
		{"DRA driver container killed (SIGKILL, as the OOM killer)", func() error { return kill("dra-driver") }},
	} {
		from := map[string]int{"dp-restarter": x.restarts("dp-restarter"), "xr-restarter": x.restarts("xr-restarter"), "dra-restarter": x.restarts("dra-restarter")}
		if err := step.do(); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		x.keepsRestarting(step.name, from)
		t.Logf("%s: restarts dp %d -> %d, xr %d -> %d, dra %d -> %d", step.name, from["dp-restarter"], x.restarts("dp-restarter"),
			from["xr-restarter"], x.restarts("xr-restarter"), from["dra-restarter"], x.restarts("dra-restarter"))
	}
	if missing := w.take(); len(missing) > 0 {
		t.Errorf("files the running pods need vanished during the steps:\n%s", strings.Join(missing, "\n"))
	}

	t.Run("the plugin's token is kept to its own node", func(t *testing.T) {
		c := c.For(t)
		x := tc{t, c}
		p := x.pluginPod("laptop")
		token, err := c.Kubectl("-n", ns, "create", "token", "wsl-gpu-hook", "--bound-object-kind", "Pod", "--bound-object-name", p,
			"--bound-object-uid", x.nsField(p, "{.metadata.uid}"))
		if err != nil {
			t.Fatal(err)
		}
		laptopSlice, _ := c.Kubectl("get", "resourceslices", "--field-selector", "spec.nodeName=laptop", "-o", "jsonpath={.items[0].metadata.name}")
		amdSlice, _ := c.Kubectl("get", "resourceslices", "--field-selector", "spec.nodeName=amd", "-o", "jsonpath={.items[0].metadata.name}")
		if laptopSlice == "" || amdSlice == "" {
			t.Fatalf("ResourceSlices of laptop %q and amd %q", laptopSlice, amdSlice)
		}
		for _, tc := range []struct {
			what string
			args []string
			want string // "" allowed; else in the refusal
		}{
			{"its own node's label of ours", []string{"label", "node", "laptop", "wsl-gpu-hook.dev/op-test=1"}, ""},
			{"another node", []string{"label", "node", "amd", "wsl-gpu-hook.dev/op-test=1"}, "may change only its own node, not amd"},
			{"a label not ours", []string{"label", "node", "laptop", "team=gpu"}, "may change only labels under wsl-gpu-hook.dev/"},
			{"a taint", []string{"taint", "node", "laptop", "op-test=1:NoSchedule"}, "may not change a node's spec"},
			{"an annotation", []string{"annotate", "node", "laptop", "op-test=1"}, "may not change a node's spec"},
			{"its own node's ResourceSlice", []string{"label", "resourceslice", laptopSlice, "op-test=1"}, ""},
			{"another node's ResourceSlice", []string{"label", "resourceslice", amdSlice, "op-test=1"}, "may write only the gpu.wsl-gpu-hook.dev pool of its own node, not pool amd"},
			{"another node's ResourceSlice, deleted", []string{"delete", "resourceslice", amdSlice}, "may write only the gpu.wsl-gpu-hook.dev pool of its own node"},
		} {
			out, err := c.KubectlAs(token, tc.args...)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("%s: refused: %v", tc.what, err)
			case tc.want != "" && (err == nil || !strings.Contains(out, tc.want)):
				t.Errorf("%s: %v: %s, want refused with %q", tc.what, err, out, tc.want)
			}
		}
		c.MustKubectl("label", "node", "laptop", "wsl-gpu-hook.dev/op-test-")
		c.MustKubectl("label", "resourceslice", laptopSlice, "op-test-")
	})

	t.Run("helm uninstall leaves no file of the project on the nodes", func(t *testing.T) {
		c := c.For(t)
		x := tc{t, c}
		x.deletePods("dp-restarter", "xr-restarter", "dra-restarter")
		c.MustKubectl("delete", "resourceclaimtemplate", "op-nvidia")
		out, err := c.Helm("uninstall", "wsl-gpu-hook", "-n", ns, "--wait", "--timeout", "3m")
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		t.Logf("helm uninstall:\n%s", out)
		if left, _ := c.Kubectl("-n", ns, "get", "pods", "-o", "name"); left != "" {
			t.Errorf("pods left after helm uninstall --wait: %s", left)
		}
		if left, _ := c.Kubectl("get", "clusterroles,clusterrolebindings,roles,rolebindings,jobs,serviceaccounts,validatingadmissionpolicies", "-A", "-o", "name"); strings.Contains(left, "wsl-gpu-hook") {
			t.Errorf("objects of the release outlive it:\n%s", left)
		}
		for _, n := range c.Nodes() {
			if got := x.nodeFiles(n); got != before[n.Spec.Name] {
				t.Errorf("node %s after uninstall:\n%s\nbefore install:\n%s", n.Spec.Name, got, before[n.Spec.Name])
			}
			if out, _ := n.Exec("sh", "-c", "ls -A /var/lib/kubelet/plugins/gpu.wsl-gpu-hook.dev 2>/dev/null; ls /var/run/cdi | grep wsl-gpu-hook; true"); strings.TrimSpace(out) != "" {
				t.Errorf("node %s: the DRA driver's files or specs of ours remain:\n%s", n.Spec.Name, out)
			}
			out := c.MustKubectl("get", "node", n.Spec.Name, "-o", `go-template={{range $k, $v := .metadata.labels}}{{$k}}{{"\n"}}{{end}}`)
			for _, l := range strings.Fields(out) {
				if strings.HasPrefix(l, "wsl-gpu-hook.dev/") && l != "wsl-gpu-hook.dev/test-node" {
					t.Errorf("node %s keeps the chart's label %s", n.Spec.Name, l)
				}
			}
		}
	})
}
