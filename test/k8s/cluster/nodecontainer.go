package cluster

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// ContainerNodeSpec is a node that runs as a privileged container of a
// real engine, as kind, k3d and minikube's docker driver run nodes. The
// engine runs under dxgsim on the simulated WSL host and starts the node
// container from NodeImage; inside it a containerd and a kubelet join the
// cluster:
//   - EngineDocker: the Docker 29 daemon with its containerd 2.4 and runc
//     1.5 (hack/engines), wired with `wsl-gpu-hook install docker`;
//   - EnginePodman: Debian 13's podman 5.4 with runc 1.5, the CDI specs
//     written by `wsl-gpu-hook install cdi` (podman 5 turns --gpus into
//     CDI nvidia.com/gpu names).
type ContainerNodeSpec struct {
	Name string
	// Engine is EngineDocker ("" too) or EnginePodman.
	Engine string
	// Profile is the simulated WSL host the engine runs on (test/simhost).
	Profile string
	// Hook is the wsl-gpu-hook binary `install docker` wires into the
	// engine (the one `make image` built).
	Hook string
	// GPUArgs are the `docker run` flags that ask for the GPU, as a user
	// types them: {"--gpus", "all"}. Empty runs the node without.
	GPUArgs []string
}

// The engines a ContainerNodeSpec can name.
const (
	EngineDocker = "docker"
	EnginePodman = "podman"
)

// ContainerNode is a node running in a container.
type ContainerNode struct {
	Spec ContainerNodeSpec
	// IP is the node's InternalIP; Dir its scratch dir on the host.
	IP, Dir string
	// Container is the node container's name in its engine.
	Container string

	c       *Cluster
	n       *Node // the network and cgroup plumbing the harness's nodes use
	engine  *Proc // dockerd, or the shell that runs podman run
	sock    string
	runc    string // runc 1.5's bin dir
	stopped bool
}

// StartContainerNode starts spec's engine and node container and waits
// until the node is Ready. The network is the harness's: the engine runs
// in a network namespace on the cluster's bridge and the node container
// shares it (--network host), so the kubelet's address is reachable from
// the API server with no NAT. Everything it started stops in t's cleanup
// (or at Stop), before the cluster's.
func (c *Cluster) StartContainerNode(t testing.TB, spec ContainerNodeSpec) *ContainerNode {
	t.Helper()
	begin := time.Now()
	k := 0
	for ; ; k++ {
		if _, err := os.Stat(filepath.Join(c.Dir, "c"+strconv.Itoa(k))); err != nil {
			break
		}
	}
	if spec.Engine == "" {
		spec.Engine = EngineDocker
	}
	cn := &ContainerNode{Spec: spec, c: c, Dir: filepath.Join(c.Dir, "c"+strconv.Itoa(k)), Container: "node-" + spec.Name}
	cn.IP = fmt.Sprintf("10.250.%d.%d", c.index, 200+k)
	cn.sock = filepath.Join(cn.Dir, "docker.sock")
	cn.n = &Node{c: c, Spec: NodeSpec{Name: spec.Name}, Dir: cn.Dir, IP: cn.IP, veth: fmt.Sprintf("wgk%dc%d", c.index, k),
		cgroupRoot: "/" + filepath.Base(c.Dir) + "-c" + strconv.Itoa(k)}
	t.Cleanup(func() { cn.Stop(t) })
	if err := cn.startEngine(t); err != nil {
		t.Fatal(err)
	}
	t.Logf("container node %s: %s up %s after start", spec.Name, spec.Engine, time.Since(begin).Round(time.Second))
	if err := cn.loadImage(); err != nil {
		t.Fatal(err)
	}
	t.Logf("container node %s: %s loaded %s after start", spec.Name, NodeImage, time.Since(begin).Round(time.Second))
	if err := cn.run(k); err != nil {
		t.Fatal(err)
	}
	c.Wait(t, 3*time.Minute, "container node "+spec.Name+" Ready", func() bool {
		if !cn.engine.Running() {
			t.Fatalf("%s exited:\n%s", spec.Engine, cn.Diagnose())
		}
		out, _ := c.Kubectl("get", "node", spec.Name, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		return out == "True"
	})
	t.Logf("container node %s: Ready %s after start", spec.Name, time.Since(begin).Round(time.Second))
	return cn
}

// startEngine makes the node's network namespace and cgroup root, wires
// the hook into the engine's private configuration, and starts the
// engine there: nsenter (the namespace) → dxgsim (the simulated /dev/dxg
// and /usr/lib/wsl, inherited by everything the engine starts) →
// pivotroot (the Debian 13 root, for its Docker CLI and podman) → dockerd,
// or a shell that runs `podman run` of the node in the foreground (podman
// has no daemon: the container must descend from a process under dxgsim).
func (cn *ContainerNode) startEngine(t testing.TB) error {
	c := cn.c
	root := c.Bins.Root
	for _, d := range []string{cn.Dir, filepath.Join(cn.Dir, "node", "sysctl"), filepath.Join(cn.Dir, "log"), filepath.Join(cn.Dir, "scratch")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	var engines []string
	if out, err := script(root, "hack/engines/build.sh", "dockerd", "containerd", "runc"); err != nil {
		return err
	} else if engines = strings.Fields(out); len(engines) != 3 {
		return fmt.Errorf("hack/engines/build.sh printed %q", out)
	}
	cn.runc = engines[2]
	trixie, err := script(root, "hack/engines/root.sh", "trixie")
	if err != nil {
		return err
	}
	pivot := filepath.Join(c.Dir, "bin", "pivotroot")
	if err := GoBuild(root, pivot, "./test/pivotroot"); err != nil {
		return err
	}
	host := filepath.Join(cn.Dir, "host")
	if _, err := run(c.Bins.Fixture, "--profile", cn.Spec.Profile, "--out", host, "--cache", filepath.Join(cacheDir(), "fixture")); err != nil {
		return err
	}
	if err := cn.n.makeCgroups(); err != nil {
		return err
	}
	if err := cn.n.network(); err != nil {
		return err
	}
	hookConfig := filepath.Join(cn.Dir, "hook.toml")
	if err := os.WriteFile(hookConfig, []byte(fmt.Sprintf("log_file = %q\nlog_level = \"debug\"\n", filepath.Join(cn.Dir, "log", "hook.log"))), 0o644); err != nil {
		return err
	}
	prefix := filepath.Join(cn.Dir, "engine-config")
	var b strings.Builder
	b.WriteString("set -e\n")
	for _, ctl := range cgroupControllers {
		fmt.Fprintf(&b, "[ ! -e %[1]s ] || echo $$ > %[1]s\n", filepath.Join("/sys/fs/cgroup", ctl, cn.n.cgroupRoot, "node", "cgroup.procs"))
	}
	fmt.Fprintf(&b, "echo $$ > %s\n", filepath.Join(cn.Dir, "engine.pid"))
	var engineArgs []string
	switch cn.Spec.Engine {
	case EngineDocker:
		if _, err := run(cn.Spec.Hook, "install", "--prefix", prefix, "--hook", cn.Spec.Hook, "docker"); err != nil {
			return err
		}
		b.WriteString(`exec dockerd "$@"` + "\n")
		engineArgs = []string{"--config-file", filepath.Join(prefix, "etc/docker/daemon.json"),
			"--data-root", filepath.Join(cn.Dir, "data"), "--exec-root", filepath.Join(cn.Dir, "exec"),
			"--pidfile", filepath.Join(cn.Dir, "docker.pid"), "-H", "unix://" + cn.sock,
			"--iptables=false", "--ip6tables=false", "--bridge=none", "--storage-driver=overlay2",
			"--cgroup-parent", cn.n.cgroupRoot + "/docker"}
	case EnginePodman:
		// The specs are written as a user does, on the (simulated) WSL
		// host; they go to /run/cdi inside the engine's mount namespace
		// only, over an empty /etc/cdi.
		cmd := exec.Command(c.Bins.Dxgsim, "--profile", cn.Spec.Profile, "--bind-host", host, "--",
			cn.Spec.Hook, "install", "--prefix", prefix, "--hook", cn.Spec.Hook, "cdi")
		cmd.Env = append(os.Environ(), "WSL_GPU_HOOK_CONFIG="+hookConfig)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("install cdi: %v\n%s", err, out)
		}
		fmt.Fprintf(&b, "[ ! -d /etc/cdi ] || mount -t tmpfs tmpfs /etc/cdi\nmkdir -p /run/cdi\ncp %s/* /run/cdi/\n", filepath.Join(prefix, "etc/cdi"))
		fmt.Fprintf(&b, "while [ ! -e %[1]s ]; do sleep 0.1; done\nexec sh %[1]s\n", filepath.Join(cn.Dir, "run.sh"))
	default:
		return fmt.Errorf("container node %s: unknown engine %q", cn.Spec.Name, cn.Spec.Engine)
	}
	args := []string{"nsenter", "--net=" + cn.n.netns, "--",
		c.Bins.Dxgsim, "--profile", cn.Spec.Profile, "--bind-host", host, "--report", filepath.Join(cn.Dir, "dxgsim.json"), "--",
		pivot, "--root", trixie, "--scratch", filepath.Join(cn.Dir, "scratch"), "--bind", filepath.Join(cacheDir(), "engines"), "--",
		"sh", "-c", b.String(), cn.Spec.Engine}
	args = append(args, engineArgs...)
	path := append(engines, filepath.Join(prefix, filepath.Dir(cn.Spec.Hook)), "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
	p, err := start(cn.Spec.Engine+" "+cn.Spec.Name, filepath.Join(cn.Dir, "log", "engine.log"),
		[]string{"PATH=" + strings.Join(path, ":"), "WSL_GPU_HOOK_CONFIG=" + hookConfig, "PODMAN_IGNORE_CGROUPSV1_WARNING=1"}, args...)
	if err != nil {
		return err
	}
	cn.engine = p
	c.procs = append(c.procs, p)
	deadline := time.Now().Add(3 * time.Minute)
	for {
		format := "{{.Server.Version}}"
		if cn.Spec.Engine == EnginePodman {
			format = "{{.Client.Version}}"
		}
		out, err := cn.Engine(nil, "version", "--format", format)
		if err == nil {
			t.Logf("container node %s: %s %s", cn.Spec.Name, cn.Spec.Engine, strings.TrimSpace(out))
			return nil
		}
		if !p.Running() || time.Now().After(deadline) {
			return fmt.Errorf("%s did not come up: %v\n%s", cn.Spec.Engine, err, tail(p.Log(), 30))
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// podman is podman's command line for the node's every call: storage in
// the node's dir, runc 1.5, cgroupfs.
func (cn *ContainerNode) podman() []string {
	return []string{"/usr/bin/podman", "--root", filepath.Join(cn.Dir, "data"), "--runroot", "/run/wgk-podman",
		"--runtime", filepath.Join(cn.runc, "runc"), "--cgroup-manager", "cgroupfs", "--events-backend", "none"}
}

// Engine runs the Debian 13 docker CLI against the node's dockerd, or
// podman, in the engine's mount namespace, with stdin from in if not nil.
func (cn *ContainerNode) Engine(in io.Reader, args ...string) (string, error) {
	data, err := os.ReadFile(filepath.Join(cn.Dir, "engine.pid"))
	if err != nil {
		return "", err
	}
	cli := []string{"/usr/bin/docker", "-H", "unix://" + cn.sock}
	if cn.Spec.Engine == EnginePodman {
		cli = cn.podman()
	}
	cmd := exec.Command("nsenter", append(append([]string{"--mount=/proc/" + strings.TrimSpace(string(data)) + "/ns/mnt", "--"}, cli...), args...)...)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root", "PODMAN_IGNORE_CGROUPSV1_WARNING=1"}
	cmd.Stdin = in
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return "", err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(5 * time.Minute):
		cmd.Process.Kill()
		err = <-done
	}
	if err != nil {
		return out.String(), fmt.Errorf("%s %s: %v: %s", cn.Spec.Engine, strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return out.String(), nil
}

// Exec runs a command inside the node container (docker/podman exec).
func (cn *ContainerNode) Exec(args ...string) (string, error) {
	return cn.Engine(nil, append([]string{"exec", cn.Container}, args...)...)
}

// loadImage builds NodeImage and loads it with `docker load` or `podman load`.
func (cn *ContainerNode) loadImage() error {
	trixie, err := script(cn.c.Bins.Root, "hack/engines/root.sh", "trixie")
	if err != nil {
		return err
	}
	runc, err := script(cn.c.Bins.Root, "hack/engines/build.sh", "runc")
	if err != nil {
		return err
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeNodeImage(pw, filepath.Join(cn.Dir, "image"), trixie, cn.c.Bins, runc)) }()
	out, err := cn.Engine(pr, "load")
	pr.Close()
	if err != nil {
		return err
	}
	if !strings.Contains(out, NodeImage) {
		return fmt.Errorf("%s load did not load %s: %s", cn.Spec.Engine, NodeImage, out)
	}
	os.RemoveAll(filepath.Join(cn.Dir, "image"))
	return nil
}

// run writes the node's configuration, starts the node container, imports
// the cluster's images into its containerd as `kind load image-archive`
// does (ctr -n k8s.io images import, inside the node) and lets the
// kubelet start.
func (cn *ContainerNode) run(k int) error {
	c := cn.c
	kc, err := c.pki.kubeconfig("node-"+cn.Spec.Name, c.Server, "system:node:"+cn.Spec.Name, "system:nodes")
	if err != nil {
		return err
	}
	kubeconfig, _ := os.ReadFile(kc)
	ca, _ := os.ReadFile(c.pki.path("ca.crt"))
	cfg := filepath.Join(cn.Dir, "node")
	// Inside the node: containerd at its default socket, the CNI plugins
	// and the CA where the image and start.sh put them.
	files := nodeConfig{
		sock: "/run/containerd/containerd.sock", cniBin: "/opt/cni/bin", subnet: 200 + k,
		cgroupRoot: cn.n.cgroupRoot, ip: cn.IP, ca: "/wgk/ca.crt",
	}.files()
	files["kubelet.kubeconfig"] = string(kubeconfig)
	files["ca.crt"] = string(ca)
	files["start.sh"] = cn.startScript()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(cfg, name), []byte(content), 0o600); err != nil {
			return err
		}
	}
	if err := writeSysctls(filepath.Join(cfg, "sysctl")); err != nil {
		return err
	}
	args := []string{"run"}
	if cn.Spec.Engine == EngineDocker {
		args = append(args, "-d")
	}
	args = append(args, "--name", cn.Container, "--hostname", cn.Spec.Name,
		"--privileged", "--network", "host", "--cgroupns", "host",
		"-v", "/sys/fs/cgroup:/sys/fs/cgroup", "-v", cfg+":/wgk:ro", "-v", filepath.Join(cn.Dir, "log")+":/wgk-log")
	switch cn.Spec.Engine {
	case EngineDocker:
		args = append(append(args, cn.Spec.GPUArgs...), NodeImage, "/wgk/start.sh")
		if _, err := cn.Engine(nil, args...); err != nil {
			return fmt.Errorf("%v\nhook log:\n%s", err, tail(cn.log("hook"), 10))
		}
	case EnginePodman:
		// In the foreground of the engine's shell (see startEngine).
		args = append(append(args, "--cgroup-parent", cn.n.cgroupRoot+"/podman"), cn.Spec.GPUArgs...)
		args = append(args, NodeImage, "/wgk/start.sh")
		var line []string
		for _, a := range append(cn.podman(), args...) {
			line = append(line, shellQuote(a))
		}
		if err := os.WriteFile(filepath.Join(cn.Dir, "run.sh"), []byte("exec "+strings.Join(line, " ")+"\n"), 0o644); err != nil {
			return err
		}
	}
	deadline := time.Now().Add(time.Minute)
	for {
		if _, err := cn.Exec("ctr", "version"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("container node %s: containerd does not answer:\n%s", cn.Spec.Name, cn.Diagnose())
		}
		if !cn.engine.Running() {
			return fmt.Errorf("container node %s: %s exited:\n%s", cn.Spec.Name, cn.Spec.Engine, cn.Diagnose())
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, img := range c.images {
		if err := cn.ImportImage(img); err != nil {
			return err
		}
	}
	return os.WriteFile(filepath.Join(cn.Dir, "log", "go"), nil, 0o644)
}

// ImportImage imports an image archive into the node's containerd the way
// `kind load image-archive` does: ctr inside the node reading stdin.
func (cn *ContainerNode) ImportImage(archive string) error {
	f, err := os.Open(archive)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = cn.Engine(f, "exec", "-i", cn.Container, "ctr", "--namespace=k8s.io", "images", "import", "--all-platforms", "--digests", "-")
	return err
}

// startScript is the node container's init: private /run and state dirs
// on tmpfs (containerd's overlayfs snapshotter cannot sit on the
// container's own overlay), the kubelet's sysctls read-only, the node's
// cgroup, containerd, then the kubelet once the harness has imported the
// images.
func (cn *ContainerNode) startScript() string {
	var b strings.Builder
	b.WriteString("set -e\nmount --make-rshared /\nmount -t tmpfs -o mode=755 tmpfs /run\n")
	b.WriteString("for d in /var/lib/containerd /var/lib/kubelet; do mkdir -p $d; mount -t tmpfs tmpfs $d; done\n")
	b.WriteString("mkdir -p /etc/cni/net.d\ncp /wgk/cni.conflist /etc/cni/net.d/10-wgk.conflist\n")
	sysctlsAndCgroup(&b, "/wgk/sysctl", cn.n.cgroupRoot)
	b.WriteString("containerd --config /wgk/containerd.toml >>/wgk-log/containerd.log 2>&1 &\n")
	b.WriteString("while [ ! -e /wgk-log/go ]; do sleep 0.1; done\n")
	fmt.Fprintf(&b, "kubelet --config /wgk/kubelet.yaml --kubeconfig /wgk/kubelet.kubeconfig --hostname-override %s --node-ip %s --node-labels wsl-gpu-hook.dev/test-node=%s --v 2 >>/wgk-log/kubelet.log 2>&1 &\n",
		cn.Spec.Name, cn.IP, cn.Spec.Name)
	b.WriteString("wait\n")
	return b.String()
}

func (cn *ContainerNode) log(name string) string {
	data, _ := os.ReadFile(filepath.Join(cn.Dir, "log", name+".log"))
	return string(data)
}

// Diagnose is the node's engine, containerd, kubelet and hook logs' last lines.
func (cn *ContainerNode) Diagnose() string {
	var b strings.Builder
	for _, d := range []string{"engine", "containerd", "kubelet", "hook"} {
		fmt.Fprintf(&b, "--- container node %s %s:\n%s\n", cn.Spec.Name, d, tail(cn.log(d), 25))
	}
	return b.String()
}

// Memory is what the node uses now, engine included: the memory cgroup's
// usage (page cache included) and its resident set (total_rss).
func (cn *ContainerNode) Memory() (usage, rss int64) {
	dir := filepath.Join("/sys/fs/cgroup/memory", cn.n.cgroupRoot)
	data, _ := os.ReadFile(filepath.Join(dir, "memory.usage_in_bytes"))
	usage, _ = strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	stat, _ := os.ReadFile(filepath.Join(dir, "memory.stat"))
	for _, l := range strings.Split(string(stat), "\n") {
		if v, ok := strings.CutPrefix(l, "total_rss "); ok {
			rss, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	return usage, rss
}

// Stop removes the node container, stops the engine, kills whatever is left
// in the node's cgroups and removes them. The network namespace goes with
// the cluster. It fails t if dxgsim saw protocol misuse.
func (cn *ContainerNode) Stop(t testing.TB) {
	if cn.stopped {
		return
	}
	cn.stopped = true
	if cn.engine != nil && cn.engine.Running() {
		if out, err := cn.Engine(nil, "rm", "-f", cn.Container); err != nil && !strings.Contains(out, "no such container") && !strings.Contains(out, "No such container") {
			t.Logf("container node %s: %v", cn.Spec.Name, err)
		}
	}
	if cn.engine != nil {
		stopUnderDxgsim(t, cn.engine, "container node "+cn.Spec.Name)
		// The cluster's waits fail when one of its processes exits.
		for i, p := range cn.c.procs {
			if p == cn.engine {
				cn.c.procs = append(cn.c.procs[:i:i], cn.c.procs[i+1:]...)
				break
			}
		}
	}
	cn.n.stop()
}

// stopUnderDxgsim stops an engine started under dxgsim, which passes
// SIGTERM on, and fails t if dxgsim saw protocol misuse.
func stopUnderDxgsim(t testing.TB, p *Proc, what string) {
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
	}
	p.Stop(5 * time.Second)
	if strings.Contains(p.Log(), "dxgsim: misuse") {
		t.Errorf("%s: dxgsim saw misuse:\n%s", what, tail(p.Log(), 10))
	}
}
