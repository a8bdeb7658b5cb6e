package cluster

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Options describes a cluster to start.
type Options struct {
	// Nodes are the cluster's nodes, each a kubelet and a containerd in
	// their own network and mount namespaces.
	Nodes []NodeSpec
	// Images are image archives (OCI layout or docker save) imported
	// into every node's containerd besides the harness's own
	// (PauseImage, TestImage).
	Images []string
	// Extra flags for the control plane's components (feature gates...).
	APIServerArgs, ControllerManagerArgs, SchedulerArgs []string
	// KubeletConfig is YAML appended to every kubelet's configuration;
	// ContainerdConfig TOML appended to every containerd's.
	KubeletConfig, ContainerdConfig string
}

// NodeSpec is one node.
type NodeSpec struct {
	Name string
	// Profile is the simulated WSL host (test/simhost): its /dev/dxg
	// (dxgsim) and its /usr/lib/wsl tree. "" is a node with neither.
	Profile string
	// NoDxg keeps the profile's /usr/lib/wsl tree but no /dev/dxg: WSL
	// with GPU support off.
	NoDxg bool
	// DxgsimArgs are extra dxgsim flags (--fault, --folder).
	DxgsimArgs []string
	// Labels are registered with the node (--node-labels).
	Labels map[string]string
	// Setup runs once the node's namespaces exist, before its containerd
	// and kubelet start: Node.Exec runs commands inside the node.
	Setup func(n *Node) error
	// K3s runs the node's containerd and kubelet as a k3s agent does
	// (k3s itself cannot be built here: its module is refused): containerd
	// from a configuration in the shape of k3s's v3 template, written to
	// k3s's path at every start (root /var/lib/rancher/k3s/agent/containerd,
	// state and socket under /run/k3s/containerd, CNI configuration under
	// /var/lib/rancher/k3s/agent/etc/cni/net.d, nothing about CDI: containerd
	// 2.x reads /etc/cdi and /var/run/cdi), and the kubelet on
	// /run/k3s/containerd/containerd.sock. /var/run is the node's /run, a
	// tmpfs that Node.Reboot empties.
	K3s bool
}

// Images every node has: the sandbox image and a glibc busybox image
// with cudaprobe (dlopens libcuda.so.1, calls cuInit) in /usr/local/bin.
const (
	PauseImage = "localhost/wslgpu-pause:1"
	TestImage  = "localhost/wslgpu-test:1"
)

// ServiceIP is the kubernetes Service's address: each node forwards it to
// the API server, so in-cluster clients work with no kube-proxy.
const ServiceIP = "10.96.0.1"

// Cluster is a running control plane and its nodes.
type Cluster struct {
	Dir  string
	Bins Binaries
	// Server is the API server's URL; Kubeconfig an admin kubeconfig.
	Server, Kubeconfig string

	t       testing.TB
	opt     Options
	index   int    // the cluster's /24 in 10.250.0.0/16
	bridge  string // host side of the nodes' network
	hostIP  string
	pki     *pki
	procs   []*Proc
	nodes   []*Node
	images  []string
	cleanup []func()
	mounts  map[string]bool // the host's mount table before the cluster
}

// Start brings up etcd, the API server, the scheduler, the controller
// manager and the nodes, and waits until every node is Ready. Everything
// stops and is removed in t's cleanup. Needs root.
func Start(t testing.TB, opt Options) *Cluster {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: runs a cluster")
	}
	for _, tool := range []string{"runc", "gcc", "busybox", "unshare", "nsenter", "ip", "iptables"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	dir, err := os.MkdirTemp("/tmp", "wgk-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	c := &Cluster{Dir: dir, t: t, opt: opt}
	if c.mounts, err = hostMounts(dir); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.stop)
	begin := time.Now()
	if c.Bins, err = Build(filepath.Join(dir, "bin")); err != nil {
		t.Fatal(err)
	}
	t.Logf("cluster: binaries ready in %s", time.Since(begin).Round(time.Second))
	if err := c.buildImages(); err != nil {
		t.Fatal(err)
	}
	if err := c.network(); err != nil {
		t.Fatal(err)
	}
	if err := c.controlPlane(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(opt.Nodes))
	for i, spec := range opt.Nodes {
		n := &Node{c: c, Spec: spec, index: i}
		c.nodes = append(c.nodes, n)
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = n.start() }()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range c.nodes {
		c.WaitFor(3*time.Minute, "node "+n.Spec.Name+" Ready", func() bool {
			out, _ := c.Kubectl("get", "node", n.Spec.Name, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
			return out == "True"
		})
	}
	// The controller manager makes each namespace's default service
	// account a moment after it starts; a pod created before is refused.
	c.WaitFor(time.Minute, "the default service account", func() bool {
		_, err := c.Kubectl("get", "serviceaccount", "default")
		return err == nil
	})
	t.Logf("cluster: %d nodes Ready %s after start", len(c.nodes), time.Since(begin).Round(time.Second))
	c.checkHostMounts("running")
	return c
}

// For returns the cluster with its helpers (WaitFor, MustKubectl, Apply,
// Node) failing t instead of the test that started it: a subtest sharing
// the cluster must not fail its parent.
func (c *Cluster) For(t testing.TB) *Cluster {
	cp := *c
	cp.t = t
	return &cp
}

// Node returns the node named name.
func (c *Cluster) Node(name string) *Node {
	for _, n := range c.nodes {
		if n.Spec.Name == name {
			return n
		}
	}
	c.t.Fatalf("no node %s", name)
	return nil
}

// Nodes returns the nodes in Options order.
func (c *Cluster) Nodes() []*Node { return c.nodes }

// Kubectl runs kubectl against the cluster as admin.
func (c *Cluster) Kubectl(args ...string) (string, error) {
	cmd := exec.Command(c.Bins.Kubectl(), append([]string{"--kubeconfig", c.Kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return strings.TrimSpace(string(out)), nil
}

// KubectlAs runs kubectl with a bearer token and nothing else: the
// client's identity is the token's (a service account's, as a process on
// a node that read a pod's token would be).
func (c *Cluster) KubectlAs(token string, args ...string) (string, error) {
	cmd := exec.Command(c.Bins.Kubectl(), append([]string{"--kubeconfig", os.DevNull, "--server", c.Server,
		"--certificate-authority", filepath.Join(c.Dir, "pki", "ca.crt"), "--token", token}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return strings.TrimSpace(string(out)), nil
}

// MustKubectl is Kubectl that fails the test on error.
func (c *Cluster) MustKubectl(args ...string) string {
	c.t.Helper()
	out, err := c.Kubectl(args...)
	if err != nil {
		c.t.Fatal(err)
	}
	return out
}

// Apply applies manifest (YAML) with kubectl.
func (c *Cluster) Apply(manifest string) {
	c.t.Helper()
	f := filepath.Join(c.Dir, fmt.Sprintf("apply-%d.yaml", time.Now().UnixNano()))
	if err := os.WriteFile(f, []byte(manifest), 0o644); err != nil {
		c.t.Fatal(err)
	}
	c.MustKubectl("apply", "-f", f)
}

// Helm runs helm against the cluster, its caches under the cluster dir.
func (c *Cluster) Helm(args ...string) (string, error) {
	cmd := exec.Command(c.Bins.Helm(), args...)
	h := filepath.Join(c.Dir, "helm")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig, "HELM_CACHE_HOME="+h+"/cache",
		"HELM_CONFIG_HOME="+h+"/config", "HELM_DATA_HOME="+h+"/data")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("helm %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// WaitFor polls cond every 250 ms until it holds or d passes; then it
// fails the test with the control plane's and nodes' last log lines.
func (c *Cluster) WaitFor(d time.Duration, what string, cond func() bool) {
	c.t.Helper()
	c.Wait(c.t, d, what, cond)
}

// Wait is WaitFor failing t, for subtests.
func (c *Cluster) Wait(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		for _, p := range c.procs {
			if !p.Running() {
				t.Fatalf("waiting for %s: %s exited:\n%s", what, p.Name, tail(p.Log(), 40))
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s\n%s", d, what, c.Diagnose())
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// Diagnose is what a failing test prints: pods, events and the daemons'
// last lines. Logs stay in Dir when K8S_TEST_KEEP is set.
func (c *Cluster) Diagnose() string {
	var b strings.Builder
	out, _ := c.Kubectl("get", "pods", "-A", "-o", "wide")
	fmt.Fprintf(&b, "--- pods:\n%s\n", out)
	out, _ = c.Kubectl("get", "events", "-A", "--sort-by=.lastTimestamp")
	fmt.Fprintf(&b, "--- events:\n%s\n", tail(out, 30))
	for _, p := range c.procs {
		fmt.Fprintf(&b, "--- %s:\n%s\n", p.Name, tail(p.Log(), 15))
	}
	for _, n := range c.nodes {
		for _, d := range []string{"containerd", "kubelet"} {
			fmt.Fprintf(&b, "--- %s %s:\n%s\n", n.Spec.Name, d, tail(n.Log(d), 25))
		}
	}
	return b.String()
}

// network makes the host side of the nodes' network: a bridge with the
// first address of a /24 no other cluster on this machine uses.
func (c *Cluster) network() error {
	lock, err := os.OpenFile("/run/wsl-gpu-hook-k8s.lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	for i := 1; i < 250; i++ {
		name := "wgk" + strconv.Itoa(i) + "br"
		if _, err := net.InterfaceByName(name); err == nil {
			continue
		}
		c.index, c.bridge, c.hostIP = i, name, fmt.Sprintf("10.250.%d.1", i)
		break
	}
	if c.bridge == "" {
		return fmt.Errorf("no free wgkNbr bridge name")
	}
	c.cleanup = append(c.cleanup, func() { exec.Command("ip", "link", "del", c.bridge).Run() })
	for _, args := range [][]string{
		{"ip", "link", "add", c.bridge, "type", "bridge"},
		{"ip", "addr", "add", c.hostIP + "/24", "dev", c.bridge},
		{"ip", "link", "set", c.bridge, "up"},
	} {
		if _, err := run(args...); err != nil {
			return err
		}
	}
	return nil
}

// controlPlane starts etcd, the API server, the controller manager and
// the scheduler and waits for the API server to be ready.
func (c *Cluster) controlPlane() error {
	p, err := newPKI(filepath.Join(c.Dir, "pki"))
	if err != nil {
		return err
	}
	c.pki = p
	port, err := freePort(c.hostIP)
	if err != nil {
		return err
	}
	c.Server = fmt.Sprintf("https://%s:%d", c.hostIP, port)
	servingCrt, servingKey, err := p.files("apiserver", "kube-apiserver", nil,
		[]net.IP{net.ParseIP(c.hostIP), net.ParseIP(ServiceIP), net.ParseIP("127.0.0.1")},
		[]string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local", "localhost"})
	if err != nil {
		return err
	}
	kcCrt, kcKey, err := p.files("apiserver-kubelet-client", "kube-apiserver-kubelet-client", []string{"system:masters"}, nil, nil)
	if err != nil {
		return err
	}
	saKey, err := p.serviceAccountKey()
	if err != nil {
		return err
	}
	if c.Kubeconfig, err = p.kubeconfig("admin", c.Server, "admin", "system:masters"); err != nil {
		return err
	}
	schedKC, err := p.kubeconfig("scheduler", c.Server, "system:kube-scheduler")
	if err != nil {
		return err
	}
	cmKC, err := p.kubeconfig("controller-manager", c.Server, "system:kube-controller-manager")
	if err != nil {
		return err
	}
	etcdPort, err := freePort("127.0.0.1")
	if err != nil {
		return err
	}
	peerPort, err := freePort("127.0.0.1")
	if err != nil {
		return err
	}
	logs := filepath.Join(c.Dir, "logs")
	os.MkdirAll(logs, 0o755)
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", etcdPort)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peerPort)
	if err := c.startProc("etcd", c.Bins.path("etcd"), "--name", "test", "--data-dir", filepath.Join(c.Dir, "etcd"),
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "test="+peerURL, "--unsafe-no-fsync", "--log-level", "warn"); err != nil {
		return err
	}
	args := []string{"--etcd-servers", etcdURL, "--bind-address", c.hostIP, "--secure-port", strconv.Itoa(port),
		"--advertise-address", c.hostIP, "--service-cluster-ip-range", "10.96.0.0/16",
		"--endpoint-reconciler-type=none", "--kubelet-preferred-address-types=InternalIP",
		"--client-ca-file", p.path("ca.crt"), "--tls-cert-file", servingCrt, "--tls-private-key-file", servingKey,
		"--kubelet-client-certificate", kcCrt, "--kubelet-client-key", kcKey,
		"--service-account-key-file", saKey, "--service-account-signing-key-file", saKey,
		"--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
		"--authorization-mode", "Node,RBAC", "--allow-privileged=true", "--profiling=false",
		"--cert-dir", filepath.Join(c.Dir, "pki", "apiserver-generated")}
	if err := c.startProc("kube-apiserver", append(append([]string{c.Bins.path("kube-apiserver")}, args...), c.opt.APIServerArgs...)...); err != nil {
		return err
	}
	ready := func() bool {
		out, err := c.Kubectl("get", "--raw", "/readyz")
		return err == nil && out == "ok"
	}
	deadline := time.Now().Add(2 * time.Minute)
	for !ready() {
		for _, p := range c.procs {
			if !p.Running() {
				return fmt.Errorf("%s exited:\n%s", p.Name, tail(p.Log(), 40))
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the API server was not ready in 2m:\n%s", tail(c.procs[1].Log(), 40))
		}
		time.Sleep(250 * time.Millisecond)
	}
	if err := c.startProc("kube-controller-manager", append([]string{c.Bins.path("kube-controller-manager"),
		"--kubeconfig", cmKC, "--leader-elect=false", "--secure-port=0",
		"--service-account-private-key-file", saKey, "--root-ca-file", p.path("ca.crt"),
		"--use-service-account-credentials=true", "--controllers=*"}, c.opt.ControllerManagerArgs...)...); err != nil {
		return err
	}
	return c.startProc("kube-scheduler", append([]string{c.Bins.path("kube-scheduler"),
		"--kubeconfig", schedKC, "--leader-elect=false", "--secure-port=0"}, c.opt.SchedulerArgs...)...)
}

func (c *Cluster) startProc(name string, args ...string) error {
	p, err := start(name, filepath.Join(c.Dir, "logs", name+".log"), nil, args...)
	if err != nil {
		return err
	}
	c.procs = append(c.procs, p)
	return nil
}

// stop tears everything down: nodes first (their pods die with their
// cgroups), then the control plane, the network and the files.
func (c *Cluster) stop() {
	var wg sync.WaitGroup
	for _, n := range c.nodes {
		wg.Add(1)
		go func() { defer wg.Done(); n.stop() }()
	}
	wg.Wait()
	for i := len(c.procs) - 1; i >= 0; i-- {
		c.procs[i].Stop(10 * time.Second)
	}
	for i := len(c.cleanup) - 1; i >= 0; i-- {
		c.cleanup[i]()
	}
	c.checkHostMounts("stopped")
	if os.Getenv("K8S_TEST_KEEP") != "" || c.t.Failed() && os.Getenv("K8S_TEST_KEEP_FAILED") != "" {
		c.t.Logf("cluster: kept %s", c.Dir)
		return
	}
	unmountUnder(c.Dir)
	os.RemoveAll(c.Dir)
}
