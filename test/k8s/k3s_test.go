package k8s

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/k8s/cluster"
)

// TestK3sNode runs the chart on a k3s-shaped node of a one-node cluster on
// a simulated NVIDIA laptop (cluster.NodeSpec.K3s: k3s's containerd
// configuration, socket and paths, the kubelet on its socket, /var/run a
// tmpfs), since k3s itself cannot be built here (its module is refused).
// Once with the device plugin (a Deployment asking nvidia.com/gpu: 1) and
// once with the DRA driver (a Deployment whose pods claim the NVIDIA
// adapter): the GPU pod gets its GPU; then the node reboots (the kubelet,
// containerd and every container stop, /var/run is emptied: the CDI specs
// and /run/k3s with it) and the chart's specs are written back before the
// GPU pod's container starts again: containerd never refuses it for a
// missing spec, and the container that runs after the reboot started
// after the spec files were written, and sees its GPU. Nothing of the
// node's reaches the machine's own /run, /var/lib or /etc.
func TestK3sNode(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a cluster")
	}
	t.Parallel()
	host := hostK3sState()
	// Registered before the cluster's own cleanup, so it runs after it.
	t.Cleanup(func() {
		if got := hostK3sState(); got != host {
			t.Errorf("after the cluster: the host's k3s and CDI paths are\n%s\nwere\n%s", got, host)
		}
	})
	begin := time.Now()
	scratch := t.TempDir()
	archive := makeImage(t, scratch)
	c := cluster.Start(t, cluster.Options{Images: []string{archive}, Nodes: []cluster.NodeSpec{
		{Name: "k3s", Profile: "nvidia-laptop", K3s: true},
	}})
	started := time.Since(begin)
	n := c.Node("k3s")
	x := tc{t, c}

	// The node runs the way k3s runs its agent, and only that way.
	out, _ := n.Exec("sh", "-c", `for f in /run/k3s/containerd/containerd.sock /var/lib/rancher/k3s/agent/etc/containerd/config.toml /run/containerd; do
	[ -e $f ] && echo "$f there" || echo "$f absent"; done; readlink -f /var/run; stat -f -c %T /var/run`)
	if want := "/run/k3s/containerd/containerd.sock there\n/var/lib/rancher/k3s/agent/etc/containerd/config.toml there\n/run/containerd absent\n/run\ntmpfs\n"; out != want {
		t.Fatalf("the node is not k3s-shaped:\n%s\nwant\n%s", out, want)
	}
	if v := c.MustKubectl("get", "node", "k3s", "-o", "jsonpath={.status.nodeInfo.containerRuntimeVersion}"); !strings.HasPrefix(v, "containerd://2.4") {
		t.Fatalf("the node's runtime is %q, want containerd 2.4", v)
	}

	if out, err := c.Helm("install", "wsl-gpu-hook", chart, "-n", ns, "--create-namespace",
		"--set", "image.tag=e2e", "--set", "interval=2s", "--wait", "--timeout", "5m"); err != nil {
		t.Fatalf("helm install: %v\n%s\n%s", err, out, c.Diagnose())
	}
	x.waitAllocatable("k3s", "nvidia.com/gpu", "1")
	c.Apply(deployment("dp", "nvidia.com/gpu", 1))
	// The kubelet refuses the pod from before the reboot (its device
	// plugin has not registered again yet: UnexpectedAdmissionError); the
	// Deployment's new pod is placed once the plugin advertises again.
	x.rebootK3s(n, "device plugin", "app=dp", true)
	c.MustKubectl("delete", "deployment", "dp", "--wait=true")
	x.wait(2*time.Minute, "the dp pods gone", func() bool { return len(x.pods("app=dp")) == 0 })

	if out, err := c.Helm("upgrade", "wsl-gpu-hook", chart, "-n", ns, "--reuse-values", "--set", "dra.enabled=true",
		"--wait", "--timeout", "3m"); err != nil {
		t.Fatalf("helm upgrade: %v\n%s\n%s", err, out, c.Diagnose())
	}
	x.waitDevices("k3s", igDevice, nvDevice)
	c.Apply(claimTemplate("nvidia", "gpu.wsl-gpu-hook.dev", nvSel, 1))
	c.Apply(draDeployment("dra", "nvidia"))
	// The kubelet starts the same pod's container again once the driver
	// has prepared its claim again.
	x.rebootK3s(n, "DRA", "app=dra", false)

	if got := hostK3sState(); got != host {
		t.Errorf("after the reboots: the host's k3s and CDI paths are\n%s\nwere\n%s", got, host)
	}
	for _, f := range []string{"/proc/self/mountinfo", "/proc/1/mountinfo"} {
		data, _ := os.ReadFile(f)
		for _, l := range strings.Split(string(data), "\n") {
			if fs := strings.Fields(l); len(fs) > 4 && (strings.HasPrefix(fs[4], "/run/k3s") || strings.HasPrefix(fs[4], "/var/lib/rancher") ||
				strings.HasPrefix(fs[4], "/run/cdi") || strings.HasPrefix(fs[4], "/var/run/cdi") || strings.HasPrefix(fs[4], n.Dir+"/")) {
				t.Errorf("a mount of the k3s node is in %s: %s", f, l)
			}
		}
	}
	t.Logf("TestK3sNode: %s, of which make image and the cluster's start %s", time.Since(begin).Round(time.Second), started.Round(time.Second))
}

// draDeployment is a Deployment whose pod claims one device from template.
func draDeployment(name, template string) string {
	p := draPod(name, "resourceClaimTemplateName: "+template)
	spec := p[strings.Index(p, "spec:\n")+len("spec:\n"):]
	spec = strings.Replace(spec, "  restartPolicy: Never\n", "", 1)
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: %[1]s}
spec:
  replicas: 1
  selector: {matchLabels: {app: %[1]s}}
  template:
    metadata: {labels: {app: %[1]s}}
    spec:
%[2]s`, name, indent(spec, "    "))
}

func indent(s, by string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = by + l
	}
	return strings.Join(lines, "\n") + "\n"
}

// rebootK3s waits for the Deployment's GPU pod (selector sel) to run its
// checks on the k3s node, reboots the node, and asserts that the GPU
// container that runs after it started after the chart's specs were back,
// that containerd never refused one for want of a spec, and that it sees
// its GPU; replaced says whether that is a new pod (the kubelet refused the
// old one) or the old pod's container started again. It logs the order of
// what happened.
func (x tc) rebootK3s(n *cluster.Node, mode, sel string, replaced bool) {
	x.Helper()
	c := x.c
	x.wait(2*time.Minute, mode+": a GPU pod", func() bool { return len(x.pods(sel)) == 1 })
	before := x.pods(sel)[0]
	checkCUDA(x.T, x.waitChecks(before), nvidiaFolder)
	// /var/run is a symlink to /run: through /proc/PID/root it would
	// resolve on the host.
	cdi := n.Path("/run/cdi")
	if specs := chartSpecs(cdi); len(specs) == 0 {
		x.Fatalf("%s: no spec of the chart in the k3s node's /var/run/cdi before the reboot", mode)
	}
	// What a reboot must empty and what it must keep.
	if out, err := n.Exec("sh", "-c", "touch /var/run/cdi/reboot-marker /run/k3s/reboot-marker /var/lib/rancher/reboot-marker"); err != nil {
		x.Fatalf("%s: %v\n%s", mode, err, out)
	}
	// The container that runs before the reboot: the one after it is
	// another (a new id), whatever the pod's status says meanwhile.
	beforeID := x.field(before, "{.status.containerStatuses[0].containerID}")
	logFrom := len(n.Log("containerd"))
	rebootAt := time.Now()
	if err := n.Reboot(); err != nil {
		x.Fatalf("%s: reboot: %v", mode, err)
	}
	up := time.Now()
	out, _ := n.Exec("sh", "-c", `for f in /var/run/cdi/reboot-marker /run/k3s/reboot-marker /var/lib/rancher/reboot-marker; do
	[ -e $f ] && echo "$f kept" || echo "$f gone"; done`)
	if want := "/var/run/cdi/reboot-marker gone\n/run/k3s/reboot-marker gone\n/var/lib/rancher/reboot-marker kept\n"; out != want {
		x.Errorf("%s: after the reboot:\n%s\nwant /var/run and /run/k3s emptied, /var/lib kept:\n%s", mode, out, want)
	}

	// The GPU pod after the reboot: the same one's container started
	// again, or the Deployment's new pod.
	var after, log string
	x.wait(4*time.Minute, mode+": a GPU pod running its checks again after the reboot", func() bool {
		for _, p := range x.pods(sel) {
			switch r := x.field(p, "{.status.containerStatuses[0].state.waiting.reason}"); r {
			case "CreateContainerError", "RunContainerError", "StartError":
				x.Fatalf("%s: pod %s after the reboot: %s: %s", mode, p, r, x.field(p, "{.status.containerStatuses[0].state.waiting.message}"))
			}
			// Until the restarted kubelet reports, the status is the old
			// container's, whose start may fall in the reboot's second:
			// its id tells it apart, its time (whole seconds) does not.
			if id := x.field(p, "{.status.containerStatuses[0].containerID}"); id == "" || id == beforeID {
				continue
			}
			started, err := time.Parse(time.RFC3339, x.field(p, "{.status.containerStatuses[0].state.running.startedAt}"))
			if err != nil || started.Before(rebootAt.Truncate(time.Second)) {
				continue
			}
			if out, _ := c.Kubectl("logs", p); strings.Contains(out, "checks-done") {
				after, log = p, out
				return true
			}
		}
		return false
	})
	checkCUDA(x.T, log, nvidiaFolder)

	// The order: the specs' times against the GPU container's first line.
	first := firstLogTime(x, after)
	specs := chartSpecs(cdi)
	if len(specs) == 0 {
		x.Errorf("%s: no spec of the chart in /var/run/cdi after the reboot", mode)
	}
	type event struct {
		at   time.Time
		what string
	}
	events := []event{{rebootAt, "reboot: the kubelet, containerd and every container stop, /run is emptied"}, {up, "the kubelet and containerd started again"},
		{first, "GPU pod " + after + ": its container's first line (CRI log time)"}}
	if s, err := time.Parse(time.RFC3339, x.field(after, "{.status.containerStatuses[0].state.running.startedAt}")); err == nil {
		events = append(events, event{s, "GPU pod " + after + ": container started (pod status, whole seconds)"})
	}
	for name, mt := range specs {
		events = append(events, event{mt, "spec /var/run/cdi/" + name + " written"})
		if !mt.Before(first) {
			x.Errorf("%s: spec %s written %s, after the GPU container's first line %s", mode, name, mt.Format(time.RFC3339Nano), first.Format(time.RFC3339Nano))
		}
		if mt.Before(rebootAt) {
			x.Errorf("%s: spec %s is from before the reboot (%s): /var/run was not emptied", mode, name, mt.Format(time.RFC3339Nano))
		}
	}
	plugin := x.pluginPod("k3s")
	for _, f := range []string{"startedAt", "finishedAt"} {
		if s, err := time.Parse(time.RFC3339, x.nsField(plugin, "{.status.initContainerStatuses[0].state.terminated."+f+"}")); err == nil {
			events = append(events, event{s, "the chart's node-setup init container " + strings.TrimSuffix(f, "At") + " (whole seconds)"})
		}
	}
	sort.SliceStable(events, func(i, j int) bool { return events[i].at.Before(events[j].at) })
	var b strings.Builder
	for _, e := range events {
		fmt.Fprintf(&b, "  %s  +%6.3fs  %s\n", e.at.Format("15:04:05.000"), e.at.Sub(rebootAt).Seconds(), e.what)
	}
	how := "restarted in place (restarts " + x.field(after, "{.status.containerStatuses[0].restartCount}") + ")"
	if after != before {
		how = fmt.Sprintf("replaced: %s was %s %s", before, x.field(before, "{.status.phase}"), x.field(before, "{.status.reason}"))
	}
	switch want := "restarted in place (restarts 1)"; {
	case replaced && !strings.HasSuffix(how, " was Failed UnexpectedAdmissionError"):
		x.Errorf("%s: the GPU pod %s, want it refused by the kubelet (UnexpectedAdmissionError) and replaced", mode, how)
	case !replaced && how != want:
		x.Errorf("%s: the GPU pod %s, want %s", mode, how, want)
	}
	x.Logf("%s: the GPU pod %s after the reboot; order:\n%s", mode, how, b.String())

	// containerd refused no container for a spec not yet there.
	if l := n.Log("containerd"); len(l) > logFrom {
		for _, line := range strings.Split(l[logFrom:], "\n") {
			if strings.Contains(line, "unresolvable CDI devices") || strings.Contains(line, "CDI device injection failed") {
				x.Errorf("%s: containerd after the reboot: %s", mode, line)
			}
		}
	}
}

// chartSpecs returns the chart's CDI specs in dir (the node's /var/run/cdi
// seen from the host) with their modification times.
func chartSpecs(dir string) map[string]time.Time {
	ents, _ := os.ReadDir(dir)
	specs := map[string]time.Time{}
	for _, e := range ents {
		if !strings.Contains(e.Name(), "wsl-gpu-hook") {
			continue
		}
		if fi, err := e.Info(); err == nil {
			specs[e.Name()] = fi.ModTime()
		}
	}
	return specs
}

// firstLogTime is when pod's current container wrote its first line, as
// containerd's CRI logged it.
func firstLogTime(x tc, pod string) time.Time {
	x.Helper()
	out, err := x.c.Kubectl("logs", "--timestamps", pod)
	if err != nil {
		x.Fatal(err)
	}
	ts, _, _ := strings.Cut(out, " ")
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		x.Fatalf("pod %s: the first log line has no time: %q", pod, out)
	}
	return t
}

// hostK3sState is what the machine itself has where a k3s node keeps its
// containerd and the chart its files: a k3s-shaped node must add nothing
// there (only the node's private mounts hold them).
func hostK3sState() string {
	var b strings.Builder
	for _, p := range []string{"/run/k3s", "/var/lib/rancher", "/var/lib/wsl-gpu-hook", "/var/lib/kubelet/plugins/gpu.wsl-gpu-hook.dev"} {
		_, err := os.Stat(p)
		fmt.Fprintf(&b, "%s exists=%s\n", p, strconv.FormatBool(err == nil))
	}
	for _, d := range []string{"/etc/cdi", "/var/run/cdi"} {
		ents, _ := os.ReadDir(d)
		for _, e := range ents {
			if strings.Contains(e.Name(), "wsl-gpu-hook") {
				fmt.Fprintf(&b, "%s\n", filepath.Join(d, e.Name()))
			}
		}
	}
	return b.String()
}
