package k8s

import (
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/k8s/cluster"
)

// benchRuns is how many pods each path starts, one at a time.
const benchRuns = 20

// events records when the API server's changes to pods and claims reached
// a watching client: the first moment each pod was seen, had a claim, was
// bound and ran, and each claim was seen and allocated. The API objects'
// own timestamps have whole seconds; a watch sees each change within
// milliseconds of it.
type events struct {
	mu   sync.Mutex
	seen map[string]time.Time // "pod/NAME/created", "pod/NAME/bound", "claim/POD/allocated", ...
	cmds []*exec.Cmd
}

func (e *events) mark(key string, at time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.seen[key]; !ok {
		e.seen[key] = at
	}
}

func (e *events) at(key string) time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.seen[key]
}

// watchEvents starts `kubectl get --watch` on pods and on resource claims
// in default.
func watchEvents(t *testing.T, c *cluster.Cluster) *events {
	e := &events{seen: map[string]time.Time{}}
	for _, kind := range []string{"pods", "resourceclaims"} {
		cmd := exec.Command(c.Bins.Kubectl(), "--kubeconfig", c.Kubeconfig, "get", kind, "--watch", "--output-watch-events", "-o", "json")
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		e.cmds = append(e.cmds, cmd)
		go e.read(kind, out)
	}
	return e
}

func (e *events) stop() {
	for _, cmd := range e.cmds {
		cmd.Process.Kill()
		cmd.Wait()
	}
}

// read decodes a watch's events and marks what each says.
func (e *events) read(kind string, r io.Reader) {
	dec := json.NewDecoder(r)
	for {
		var ev struct {
			Object struct {
				Metadata struct {
					Name            string
					OwnerReferences []struct{ Name string }
				}
				Spec struct {
					NodeName string
				}
				Status struct {
					Allocation            *json.RawMessage
					ResourceClaimStatuses []json.RawMessage
					ContainerStatuses     []struct {
						State struct{ Running *json.RawMessage }
					}
				}
			}
		}
		if err := dec.Decode(&ev); err != nil {
			return
		}
		now := time.Now()
		o := ev.Object
		if kind == "resourceclaims" {
			// A claim made for a pod (from its template, or for its
			// extended resource) is the pod's.
			if len(o.Metadata.OwnerReferences) == 0 {
				continue
			}
			pod := o.Metadata.OwnerReferences[0].Name
			e.mark("claim/"+pod+"/created", now)
			if o.Status.Allocation != nil {
				e.mark("claim/"+pod+"/allocated", now)
			}
			continue
		}
		pod := o.Metadata.Name
		e.mark("pod/"+pod+"/created", now)
		if o.Spec.NodeName != "" {
			e.mark("pod/"+pod+"/bound", now)
		}
		if len(o.Status.ContainerStatuses) > 0 && o.Status.ContainerStatuses[0].State.Running != nil {
			e.mark("pod/"+pod+"/running", now)
		}
	}
}

// nodeStamps are the moments of one pod's start in the node's logs: the
// kubelet's (klog, microseconds), the DRA driver's (slog, milliseconds)
// and containerd's (nanoseconds).
type nodeStamps struct {
	syncAdd                    time.Time     // the kubelet got the pod
	prepared                   time.Time     // the driver answered NodePrepareResources
	ours                       time.Duration // the driver's own time in it
	sandbox, sandboxed         time.Time     // RunPodSandbox called, returned
	create, created            time.Time     // CreateContainer called, returned (CDI edits applied)
	start, started             time.Time     // StartContainer called (runc create and start, the hook), returned
	sandboxID, containerID, ok string
}

var (
	klogLine       = regexp.MustCompile(`^I(\d{4} \d{2}:\d{2}:\d{2}\.\d{6})\s+\d+ \S+\] "SyncLoop ADD" source="api" pods=\["default/([^"]+)"\]`)
	containerdTime = regexp.MustCompile(`^time="([^"]+)"`)
	sandboxFor     = regexp.MustCompile(`msg="RunPodSandbox for name:\\"([^\\]+)\\".*namespace:\\"default\\"(?: returns sandbox id \\"([0-9a-f]+)\\")?"`)
	createIn       = regexp.MustCompile(`msg="CreateContainer within sandbox \\"([0-9a-f]+)\\" for (?:container )?name:\\"main\\"(?:.* returns container id \\"([0-9a-f]+)\\")?`)
	startFor       = regexp.MustCompile(`msg="StartContainer for \\"([0-9a-f]+)\\"( returns successfully)?"`)
	preparedLine   = regexp.MustCompile(`^time=(\S+) level=INFO msg=prepared claim=default/(\S+) .*took=(\S+)`)
)

// parseNode reads the node's logs and the driver's for pods.
func parseNode(t *testing.T, n *cluster.Node, driverLog string, pods []string) map[string]*nodeStamps {
	out := map[string]*nodeStamps{}
	for _, p := range pods {
		out[p] = &nodeStamps{}
	}
	year := time.Now().Year()
	for _, l := range strings.Split(n.Log("kubelet"), "\n") {
		if m := klogLine.FindStringSubmatch(l); m != nil && out[m[2]] != nil {
			if ts, err := time.ParseInLocation("20060102 15:04:05.000000", strconv.Itoa(year)+m[1], time.Local); err == nil {
				out[m[2]].syncAdd = ts
			}
		}
	}
	bySandbox, byContainer := map[string]*nodeStamps{}, map[string]*nodeStamps{}
	for _, l := range strings.Split(n.Log("containerd"), "\n") {
		tm := containerdTime.FindStringSubmatch(l)
		if tm == nil {
			continue
		}
		ts, err := time.Parse(time.RFC3339Nano, tm[1])
		if err != nil {
			continue
		}
		if m := sandboxFor.FindStringSubmatch(l); m != nil && out[m[1]] != nil {
			if s := out[m[1]]; m[2] == "" {
				s.sandbox = ts
			} else {
				s.sandboxed, s.sandboxID = ts, m[2]
				bySandbox[m[2]] = s
			}
		} else if m := createIn.FindStringSubmatch(l); m != nil && bySandbox[m[1]] != nil {
			if s := bySandbox[m[1]]; m[2] == "" {
				s.create = ts
			} else {
				s.created, s.containerID = ts, m[2]
				byContainer[m[2]] = s
			}
		} else if m := startFor.FindStringSubmatch(l); m != nil && byContainer[m[1]] != nil {
			if s := byContainer[m[1]]; m[2] == "" {
				s.start = ts
			} else {
				s.started = ts
			}
		}
	}
	for _, l := range strings.Split(driverLog, "\n") {
		m := preparedLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		// The claim is named after its pod: <pod>-<claim>-<suffix>, or
		// <pod>-extended-resources-<suffix> for an extended resource.
		for _, p := range pods {
			if strings.HasPrefix(m[2], p+"-") {
				ts, err1 := time.Parse(time.RFC3339Nano, m[1])
				took, err2 := time.ParseDuration(m[3])
				if err1 == nil && err2 == nil {
					out[p].prepared, out[p].ours = ts, took
				}
			}
		}
	}
	return out
}

// stage is one step of claim to running, measured per pod.
type stage struct {
	name string
	from func(p string) time.Time
	to   func(p string) time.Time
}

// benchClaimToRunning (K8S_BENCH=1) starts benchRuns pods through each
// path on the laptop, one at a time, and reports stage by stage where
// claim to running goes: DRA from a claim template, DRA through the
// nvidia.com/gpu mapping (extended resource), then the device plugin on
// the same cluster. Each pod's stages come from a watch on the API
// server (created, claim made, allocated, bound, running) and from the
// node's logs (the kubelet's SyncLoop ADD, the driver's prepare,
// containerd's sandbox, create and start).
func benchClaimToRunning(t *testing.T, c *cluster.Cluster) {
	x := tc{t, c}
	laptop := c.Node("laptop")
	c.Apply(claimTemplate("bench-nvidia", "nvidia.gpu.wsl-gpu-hook.dev", "", 1))
	ev := watchEvents(t, c)
	defer ev.stop()
	time.Sleep(time.Second) // the watches' initial lists

	run := func(name, manifest string) {
		x.Helper()
		c.Apply(manifest)
		x.wait(2*time.Minute, "pod "+name+" running", func() bool { return !ev.at("pod/" + name + "/running").IsZero() })
		x.deletePods(name)
	}
	paths := []struct {
		name, prefix string
		pod          func(name string) string
	}{
		{"DRA, claim template", "b-dra-", func(n string) string { return benchPod(n, "claim: bench-nvidia") }},
		{"DRA, nvidia.com/gpu", "b-ext-", func(n string) string { return benchPod(n, "limits") }},
	}
	for i := range benchRuns {
		for _, p := range paths {
			run(p.prefix+strconv.Itoa(i), p.pod(p.prefix+strconv.Itoa(i)))
		}
	}
	driverLog, err := c.Kubectl("-n", ns, "logs", x.pluginPod("laptop"), "-c", "dra-driver")
	if err != nil {
		t.Fatalf("the driver's log: %v", err)
	}

	if out, err := c.Helm("upgrade", "wsl-gpu-hook", chart, "-n", ns, "--reuse-values", "--set", "dra.enabled=false", "--wait", "--timeout", "3m"); err != nil {
		t.Fatalf("helm upgrade to the device plugin: %v\n%s", err, out)
	}
	x.waitAllocatable("laptop", "nvidia.com/gpu", "1")
	dp := struct {
		name, prefix string
		pod          func(name string) string
	}{"device plugin", "b-dp-", func(n string) string { return benchPod(n, "limits") }}
	for i := range benchRuns {
		run(dp.prefix+strconv.Itoa(i), dp.pod(dp.prefix+strconv.Itoa(i)))
	}
	paths = append(paths, dp)

	var pods []string
	for _, p := range paths {
		for i := range benchRuns {
			pods = append(pods, p.prefix+strconv.Itoa(i))
		}
	}
	node := parseNode(t, laptop, driverLog, pods)
	api := func(key string) func(string) time.Time {
		return func(p string) time.Time { return ev.at(strings.Replace(key, "POD", p, 1)) }
	}
	// Stages a DRA pod has and a device-plugin pod skips start where the
	// previous one ended, so each path's stages sum to its total.
	claimOr := func(p string) time.Time {
		if t := ev.at("claim/" + p + "/created"); !t.IsZero() && strings.HasPrefix(p, "b-dra-") {
			return t
		}
		return ev.at("pod/" + p + "/created")
	}
	prepOr := func(p string) time.Time {
		if s := node[p]; !s.prepared.IsZero() {
			return s.prepared.Add(-s.ours)
		}
		return node[p].sandbox
	}
	prepEnd := func(p string) time.Time {
		if s := node[p]; !s.prepared.IsZero() {
			return s.prepared
		}
		return node[p].sandbox
	}
	stages := []stage{
		{"claim made from the template (controller manager)", api("pod/POD/created"), claimOr},
		{"scheduled: allocated and bound (scheduler)", claimOr, api("pod/POD/bound")},
		{"bound to the kubelet's SyncLoop ADD", api("pod/POD/bound"), func(p string) time.Time { return node[p].syncAdd }},
		{"kubelet: admission, volumes, its and the plugin library's claim reads", func(p string) time.Time { return node[p].syncAdd }, prepOr},
		{"driver's own prepare (ours)", prepOr, prepEnd},
		{"prepare answered to RunPodSandbox", prepEnd, func(p string) time.Time { return node[p].sandbox }},
		{"RunPodSandbox (containerd, CNI)", func(p string) time.Time { return node[p].sandbox }, func(p string) time.Time { return node[p].sandboxed }},
		{"sandbox to CreateContainer (kubelet)", func(p string) time.Time { return node[p].sandboxed }, func(p string) time.Time { return node[p].create }},
		{"CreateContainer (containerd, CDI edits)", func(p string) time.Time { return node[p].create }, func(p string) time.Time { return node[p].created }},
		{"created to StartContainer (kubelet)", func(p string) time.Time { return node[p].created }, func(p string) time.Time { return node[p].start }},
		{"StartContainer (runc, the hook)", func(p string) time.Time { return node[p].start }, func(p string) time.Time { return node[p].started }},
		{"started to Running in the API (kubelet status)", func(p string) time.Time { return node[p].started }, api("pod/POD/running")},
		{"total: created to Running", api("pod/POD/created"), api("pod/POD/running")},
	}
	var b strings.Builder
	fmt.Fprintf(&b, "claim to running, median of %d pods each (ms; min-max in brackets)\n\n| stage |", benchRuns)
	for _, p := range paths {
		fmt.Fprintf(&b, " %s |", p.name)
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", len(paths)) + "\n")
	for _, s := range stages {
		fmt.Fprintf(&b, "| %s |", s.name)
		for _, p := range paths {
			var ds []time.Duration
			for i := range benchRuns {
				pod := p.prefix + strconv.Itoa(i)
				from, to := s.from(pod), s.to(pod)
				if from.IsZero() || to.IsZero() {
					continue
				}
				ds = append(ds, to.Sub(from))
			}
			fmt.Fprintf(&b, " %s |", summary(ds))
		}
		b.WriteString("\n")
	}
	total := func(prefix string) time.Duration {
		var ds []time.Duration
		for i := range benchRuns {
			p := prefix + strconv.Itoa(i)
			if from, to := ev.at("pod/"+p+"/created"), ev.at("pod/"+p+"/running"); !from.IsZero() && !to.IsZero() {
				ds = append(ds, to.Sub(from))
			}
		}
		if len(ds) == 0 {
			return 0
		}
		return median(ds)
	}
	for _, p := range paths[:2] {
		fmt.Fprintf(&b, "\n%s minus device plugin, median created to Running: %+d ms (the goal: at most +500 ms)", p.name,
			(total(p.prefix) - total(dp.prefix)).Milliseconds())
	}
	t.Logf("%s", b.String())
}

// summary is "median [min-max]" in milliseconds, or "-" with no samples.
func summary(ds []time.Duration) string {
	if len(ds) == 0 {
		return "-"
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	ms := func(d time.Duration) string {
		return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 0, 64)
	}
	return fmt.Sprintf("%s [%s-%s]", ms(median(ds)), ms(slices.Min(ds)), ms(slices.Max(ds)))
}

// benchPod is restarter's pod for the laptop, asking through ask, with a
// container that stays up (its first start is what is timed).
func benchPod(name, ask string) string {
	return strings.Replace(restarter(name, ask), strconv.Quote(restartScript), strconv.Quote("exec sleep 3600"), 1)
}
