package k8s

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/k8s/cluster"
)

// metadataFile is where a pod's claim "gpu" from a template, request
// "gpu", finds its device metadata (KEP-5304).
const metadataFile = "/var/run/kubernetes.io/dra-device-attributes/resourceclaimtemplates/gpu/gpu/gpu.wsl-gpu-hook.dev-metadata.json"

// shareScript prints what the claim says the container got (its
// variables, the metadata file's request and memory), then gpuScript.
const shareScript = `env | grep '^WSL_GPU_DRA_' | sort
sed -n 's/.*"name": "\(gpu[^"]*\)".*/metadata request \1/p; s/.*"int": \([0-9]*\).*/metadata int \1/p' ` + metadataFile + `
` + gpuScript

// sharePod is a pod whose one container uses the pod claim "gpu" from
// template, printing shareScript's lines.
func sharePod(name, template string) string {
	return strings.Replace(draPod(name, "resourceClaimTemplateName: "+template), strconv.Quote(draScript), strconv.Quote(shareScript), 1)
}

// memoryTemplate asks one device of class with memory of it.
func memoryTemplate(name, class, memory string) string {
	return claimTemplate(name, class, "", 1) + "          capacity: {requests: {memory: " + memory + "}}\n"
}

// readmeFence returns the first block fenced as lang in docs/kubernetes.md's
// section under heading that contains want.
func readmeFence(t *testing.T, heading, lang, want string) string {
	t.Helper()
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "docs", "kubernetes.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(data), "\n"+heading+"\n")
	section, _, _ = strings.Cut(section, "\n#")
	for _, part := range strings.Split(section, "\n```"+lang+"\n")[1:] {
		if block, _, ok := strings.Cut(part, "\n```\n"); ok && strings.Contains(block, want) {
			return block
		}
	}
	t.Fatalf("docs/kubernetes.md has no ```%s block with %q under %q", lang, want, heading)
	return ""
}

// pinned is the page's fallback pod renamed name and pinned to node.
func pinned(t *testing.T, pod, name, node string) string {
	t.Helper()
	out := strings.Replace(pod, "metadata: {name: fallback}", "metadata: {name: "+name+"}", 1)
	out = strings.Replace(out, "\nspec:\n", "\nspec:\n  nodeSelector: {kubernetes.io/hostname: "+node+"}\n  terminationGracePeriodSeconds: 1\n", 1)
	if out == pod || !strings.Contains(out, "nodeSelector") {
		t.Fatalf("the page's fallback pod changed shape: change pinned with it:\n%s", pod)
	}
	return out
}

// printed waits until pod has exited 0 and returns its log.
func (x tc) printed(pod string) string {
	x.Helper()
	x.wait(2*time.Minute, "pod "+pod+" to succeed", func() bool {
		if p := x.field(pod, "{.status.phase}"); p == "Failed" {
			x.Fatalf("pod %s failed: %s", pod, x.field(pod, "{.status.containerStatuses[0].state.terminated.message}"))
		}
		return x.field(pod, "{.status.phase}") == "Succeeded"
	})
	out, _ := x.c.Kubectl("logs", pod)
	return out
}

// unschedulable waits for the scheduler's verdict on pod and returns it.
func (x tc) unschedulable(pod string) string {
	x.Helper()
	var reason, msg string
	x.wait(time.Minute, "the scheduler's verdict on "+pod, func() bool {
		reason, msg = x.scheduled(pod)
		return msg != ""
	})
	if reason != "Unschedulable" || x.field(pod, "{.status.phase}") != "Pending" {
		x.Errorf("pod %s: %s %s: %s, want Pending, Unschedulable", pod, x.field(pod, "{.status.phase}"), reason, msg)
	}
	return msg
}

// testDRAShares runs, on the chart installed with DRA, what sharing an
// adapter by memory promises: the page's fallbacks on each node, four
// 1Gi claims on the laptop's 6 GiB RTX at once, a 3Gi one waiting for
// room, one larger than the adapter waiting for good, a monitoring pod
// with admin access reading the adapter's statistics, and the shares
// kept through a driver kill and a node pod deletion, then unprepared.
func testDRAShares(t *testing.T, c *cluster.Cluster) {
	laptop := c.Node("laptop")
	heading := "### Fallbacks: firstAvailable"
	fallback := readmeFence(t, heading, "yaml", "firstAvailable")
	template, pod, ok := strings.Cut(fallback, "\n---\n")
	if !ok {
		t.Fatalf("the page's fallback example is not a template and a pod:\n%s", fallback)
	}
	if err := c.ImportStandIn("library/busybox:1.37", nil, nil); err != nil {
		t.Fatal(err)
	}
	c.Apply(template)

	t.Run("the README's fallbacks, as written, on each node", func(t *testing.T) {
		c := c.For(t)
		x := tc{t, c}
		want := map[string]string{"laptop": "gpu/discrete NVIDIA GeForce RTX 3060 Laptop GPU", "amd": "gpu/discrete AMD Radeon RX 7900 XTX",
			"npu": "gpu/igpu Intel(R) Arc(TM) Graphics"}
		for node := range want {
			c.Apply(pinned(t, pod, "fallback-"+node, node))
		}
		for node, w := range want {
			out := x.printed("fallback-" + node)
			if got := envOf(out, "WSL_GPU_DRA_REQUEST") + " " + envOf(out, "WSL_GPU_DRA_DESCRIPTION"); got != w {
				t.Errorf("on %s the fallback got %q, want %q:\n%s", node, got, w, out)
			}
		}
		x.deletePods("fallback-laptop", "fallback-amd", "fallback-npu")
	})

	c.Apply(memoryTemplate("share-1g", "nvidia.gpu.wsl-gpu-hook.dev", "1Gi"))
	c.Apply(memoryTemplate("share-3g", "nvidia.gpu.wsl-gpu-hook.dev", "3Gi"))
	c.Apply(memoryTemplate("share-8g", "nvidia.gpu.wsl-gpu-hook.dev", "8Gi"))
	shares := []string{"share-a", "share-b", "share-c", "share-d"}
	t.Run("four 1Gi claims run at once on the 6 GiB adapter", func(t *testing.T) {
		c := c.For(t)
		x := tc{t, c}
		for _, p := range shares {
			c.Apply(sharePod(p, "share-1g"))
		}
		for _, p := range shares {
			out := x.waitChecks(p)
			checkCUDA(t, out, nvidiaFolder)
			for _, want := range []string{"WSL_GPU_DRA_MEMORY=1073741824", "WSL_GPU_DRA_LUID=0x4486d1", "WSL_GPU_DRA_INDEX=1", "WSL_GPU_DRA_REQUEST=gpu",
				"WSL_GPU_DRA_DEVICE=" + nvDevice, "WSL_GPU_DRA_DESCRIPTION=NVIDIA GeForce RTX 3060 Laptop GPU", "metadata request gpu\n", "metadata int 1073741824\n"} {
				if !strings.Contains(out, want) {
					t.Errorf("pod %s lacks %q:\n%s", p, want, out)
				}
			}
		}
		if n := strings.Count(claimSpecs(laptop), "\n") + 1; n != 4 {
			t.Errorf("%d claim specs on the laptop, want one per share:\n%s", n, claimSpecs(laptop))
		}
		// What the claims were promised, as the DRA driver serves it:
		// "requested by claims", to set beside "used".
		ip := x.nsField(x.pluginPod("laptop"), "{.status.podIP}")
		out, err := laptop.Exec("busybox", "wget", "-q", "-O", "-", "http://"+ip+":9836/metrics")
		if err != nil {
			t.Fatalf("scrape the DRA driver: %v\n%s", err, out)
		}
		var sum float64
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, `wsl_gpu_claim_memory_bytes{claim=`) && strings.Contains(l, `gpu="`+nvDevice+`"`) {
				var v float64
				fmt.Sscan(l[strings.LastIndexByte(l, ' ')+1:], &v)
				sum += v
			}
		}
		if sum != 4<<30 {
			t.Errorf("the DRA driver reports %v bytes promised on %s, want the four shares' 4 GiB:\n%s", sum, nvDevice, out)
		}
	})

	// The monitoring pod holds its claim (its second container sleeps)
	// until the end: the 3Gi share below fits beside it, as admin access
	// counts against no one.
	t.Cleanup(func() { c.Kubectl("delete", "namespace", "monitoring", "--wait=false") })
	t.Run("a monitoring pod with admin access reads the adapter the shares hold", func(t *testing.T) {
		c := c.For(t)
		x := tc{t, c}
		c.MustKubectl("create", "namespace", "monitoring")
		c.MustKubectl("label", "namespace", "monitoring", "resource.kubernetes.io/admin-access=true")
		c.Apply(readmeFence(t, "### Sharing an adapter by memory", "yaml", "adminAccess: true"))
		c.Apply(fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: top, namespace: monitoring}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  resourceClaims: [{name: gpu, resourceClaimTemplateName: watch-nvidia}]
  containers:
  - name: top
    image: %s
    imagePullPolicy: Never
    command: [/usr/bin/wsl-gpu-ctl, top, --json, --interval, 200ms]
    securityContext: {runAsUser: 0}
    resources: {claims: [{name: gpu}]}
  - name: hold
    image: %s
    imagePullPolicy: Never
    command: [sleep, "3600"]
    resources: {claims: [{name: gpu}]}
`, image, cluster.TestImage))
		var code string
		x.wait(2*time.Minute, "the monitoring pod's top to finish", func() bool {
			code, _ = c.Kubectl("-n", "monitoring", "get", "pod", "top", "-o", `jsonpath={.status.containerStatuses[?(@.name=="top")].state.terminated.exitCode}`)
			return code != ""
		})
		out, _ := c.Kubectl("-n", "monitoring", "logs", "top", "-c", "top")
		var sample struct {
			Adapters []struct {
				LUID, Description, Error string
				Local                    struct{ TotalBytes uint64 }
				Engines                  []json.RawMessage
			}
		}
		if err := json.Unmarshal([]byte(out), &sample); code != "0" || err != nil {
			t.Fatalf("monitoring pod's top exited %s, %v:\n%s", code, err, out)
		}
		found := false
		for _, a := range sample.Adapters {
			if a.LUID == "0x4486d1" {
				found = a.Error == "" && a.Local.TotalBytes > 0 && len(a.Engines) > 0
				t.Logf("the monitoring pod sees %s: %d bytes local, %d engines, error %q", a.Description, a.Local.TotalBytes, len(a.Engines), a.Error)
			}
		}
		if !found {
			t.Errorf("the monitoring pod read no statistics of the NVIDIA adapter:\n%s", out)
		}
	})

	t.Run("a 3Gi claim waits for room; one larger than the adapter waits for good", func(t *testing.T) {
		c := c.For(t)
		x := tc{t, c}
		c.Apply(sharePod("share-3g", "share-3g"))
		c.Apply(sharePod("share-8g", "share-8g"))
		for _, p := range []string{"share-3g", "share-8g"} {
			msg := x.unschedulable(p)
			t.Logf("scheduler on %s: %s", p, msg)
			if !strings.Contains(msg, "cannot allocate all claims") {
				t.Errorf("%s waits with %q, want the scheduler's cannot allocate all claims", p, msg)
			}
		}
	})

	t.Run("the README's fallback gets the iGPU when the RTX is full, the NVIDIA branch where 2Gi fits", func(t *testing.T) {
		c := c.For(t)
		x := tc{t, c}
		// Two GiB are free on the RTX: the first choice, lowered to 2Gi,
		// wins and takes them.
		lowered := strings.Replace(strings.Replace(template, "name: fallback}", "name: fallback-2g}", 1), "memory: 8Gi", "memory: 2Gi", 1)
		c.Apply(lowered)
		c.Apply(sharePod("fallback-2g", "fallback-2g"))
		if out := x.waitChecks("fallback-2g"); !strings.Contains(out, "WSL_GPU_DRA_REQUEST=gpu/nvidia\n") || !strings.Contains(out, "WSL_GPU_DRA_MEMORY=2147483648\n") {
			t.Errorf("the fallback lowered to 2Gi on the laptop:\n%s", out)
		}
		c.Apply(pinned(t, pod, "fallback-full", "laptop"))
		out := x.printed("fallback-full")
		if got := envOf(out, "WSL_GPU_DRA_REQUEST") + " " + envOf(out, "WSL_GPU_DRA_DESCRIPTION"); got != "gpu/igpu Intel(R) Iris(R) Xe Graphics" {
			t.Errorf("the fallback on a full RTX got %q, want the iGPU:\n%s", got, out)
		}
		x.deletePods("fallback-2g", "fallback-full")
		c.MustKubectl("delete", "resourceclaimtemplate", "fallback-2g")
	})

	t.Run("the 3Gi claim runs once a 1Gi one ends, beside the monitoring pod", func(t *testing.T) {
		c := c.For(t)
		x := tc{t, c}
		if p := x.field("share-3g", "{.status.phase}"); p != "Pending" {
			t.Fatalf("share-3g is %s with 4Gi of 6 held", p)
		}
		if p, _ := c.Kubectl("-n", "monitoring", "get", "pod", "top", "-o", "jsonpath={.status.phase}"); p != "Running" {
			t.Errorf("the monitoring pod is %s, want Running (holding its claim)", p)
		}
		x.deletePods(shares[0])
		shares = shares[1:]
		out := x.waitChecks("share-3g")
		if !strings.Contains(out, "WSL_GPU_DRA_MEMORY=3221225472\n") {
			t.Errorf("share-3g:\n%s", out)
		}
		if msg := x.unschedulable("share-8g"); !strings.Contains(msg, "cannot allocate all claims") {
			t.Errorf("share-8g: %s", msg)
		}
		if out, err := c.Kubectl("-n", "monitoring", "delete", "pod", "top", "--wait=true", "--timeout=2m"); err != nil {
			t.Errorf("delete the monitoring pod: %v: %s", err, out)
		}
	})

	t.Run("the shares survive a driver kill and a node pod deletion, then are unprepared", func(t *testing.T) {
		c := c.For(t)
		x := tc{t, c}
		running := append(append([]string{}, shares...), "share-3g")
		ids := map[string]string{}
		for _, p := range running {
			ids[p] = x.field(p, "{.status.containerStatuses[0].containerID}")
		}
		shared := func() int {
			ckpt, _ := laptop.Exec("cat", "/var/lib/kubelet/plugins/gpu.wsl-gpu-hook.dev/checkpoint.json")
			return strings.Count(ckpt, `"shareID"`)
		}
		// The monitoring pod's claim goes once the kubelet has cleaned
		// up after it.
		x.wait(time.Minute, "the checkpoint to hold the running shares only", func() bool { return shared() == len(running) })
		specs := claimSpecs(laptop)
		ready := func(old string) bool {
			p := x.pluginPod("laptop")
			return p != "" && !strings.Contains(p, " ") && p != old && x.nsField(p, `{.status.conditions[?(@.type=="Ready")].status}`) == "True"
		}
		p := x.pluginPod("laptop")
		restarts := x.nsField(p, `{.status.containerStatuses[?(@.name=="dra-driver")].restartCount}`)
		id := strings.TrimPrefix(x.nsField(p, `{.status.containerStatuses[?(@.name=="dra-driver")].containerID}`), "containerd://")
		if out, err := laptop.Ctr("tasks", "kill", "--signal", "SIGKILL", id); err != nil {
			t.Fatalf("kill the driver: %v: %s", err, out)
		}
		x.wait(2*time.Minute, "the driver started again", func() bool {
			return x.nsField(p, `{.status.containerStatuses[?(@.name=="dra-driver")].restartCount}`) != restarts && ready("")
		})
		c.MustKubectl("-n", ns, "delete", "pod", p)
		x.wait(2*time.Minute, "a new node pod ready", func() bool { return ready(p) })
		for _, p := range running {
			if got := x.field(p, "{.status.containerStatuses[0].containerID}"); got != ids[p] || x.field(p, "{.status.phase}") != "Running" {
				t.Errorf("pod %s after the restarts: %s %s, want Running %s", p, x.field(p, "{.status.phase}"), got, ids[p])
			}
		}
		if got := claimSpecs(laptop); got != specs {
			t.Errorf("claim specs after the restarts:\n%s\nwant\n%s", got, specs)
		}
		if n := shared(); n != len(running) {
			t.Errorf("the checkpoint after the restarts holds %d shares, want %d", n, len(running))
		}
		// A new share fits nowhere while the RTX is full: the restarted
		// driver republished the same capacity and the scheduler counts
		// the running claims.
		c.Apply(sharePod("share-late", "share-1g"))
		t.Logf("scheduler on share-late: %s", x.unschedulable("share-late"))

		x.deletePods(append(running, "share-late", "share-8g")...)
		x.wait(time.Minute, "the claims unprepared", func() bool {
			left, _ := laptop.Exec("sh", "-c", "ls /var/lib/kubelet/plugins/gpu.wsl-gpu-hook.dev/claims; ls /var/run/cdi | grep '^gpu.wsl-gpu-hook.dev-claim_'; true")
			return strings.TrimSpace(left) == ""
		})
		if out, _ := laptop.Exec("cat", "/var/lib/kubelet/plugins/gpu.wsl-gpu-hook.dev/checkpoint.json"); strings.Contains(out, `"devices"`) {
			t.Errorf("the checkpoint after unprepare still holds claims:\n%s", out)
		}
	})
	c.Kubectl("delete", "resourceclaimtemplate", "share-1g", "share-3g", "share-8g", "fallback")
}

// envOf is the value of variable name in a pod's printed env lines.
func envOf(out, name string) string {
	for _, l := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(l, name+"="); ok {
			return v
		}
	}
	return ""
}
