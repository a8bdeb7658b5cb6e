package cluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/moby/sys/mountinfo"
)

// Node is one node: a supervisor shell in the node's network namespace and
// private mount namespace (under dxgsim when it has a profile), running its
// containerd and kubelet and restarting either when it exits.
type Node struct {
	Spec NodeSpec
	// IP is the node's address (its InternalIP); HostTree the simulated
	// Windows side's files (HostTree/usr/lib/wsl appears at /usr/lib/wsl
	// inside the node); Dir the node's scratch dir on the host.
	IP, HostTree, Dir string

	c          *Cluster
	index      int
	veth       string // the host side of the node's eth0
	netns      string // /proc/PID/ns/net of the process holding it
	holder     *Proc  // keeps the network namespace while the node is set up
	cgroupRoot string
	sock       string
	super      *Proc
}

// cgroupControllers are the hierarchies the kubelet and runc use here (v1,
// and the v2 one a hybrid machine also mounts).
var cgroupControllers = []string{"cpu", "cpuacct", "cpuset", "memory", "devices", "freezer", "blkio", "pids", "systemd", "unified"}

// kubeletSysctls are the values the kubelet sets on the host unless it
// already finds them (overcommit, panic on oops, reboot 10 s after a
// panic). A shared machine must not get those: the node's kubelet reads
// them from read-only files bound over /proc/sys in its mount namespace.
var kubeletSysctls = map[string]string{
	"vm/overcommit_memory":      "1",
	"vm/panic_on_oom":           "0",
	"kernel/panic":              "10",
	"kernel/panic_on_oops":      "1",
	"kernel/keys/root_maxkeys":  "1000000",
	"kernel/keys/root_maxbytes": "25000000",
}

func (n *Node) start() error {
	c := n.c
	n.Dir = filepath.Join(c.Dir, "n"+strconv.Itoa(n.index))
	n.veth = fmt.Sprintf("wgk%dn%d", c.index, n.index)
	n.IP = fmt.Sprintf("10.250.%d.%d", c.index, 10+n.index)
	n.cgroupRoot = "/" + filepath.Base(c.Dir) + "-n" + strconv.Itoa(n.index)
	n.sock = filepath.Join(n.Dir, "containerd.sock")
	if n.Spec.K3s {
		n.sock = k3sSocket
	}
	for _, d := range []string{n.Dir, filepath.Join(n.Dir, "priv"), filepath.Join(n.Dir, "sysctl")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if n.Spec.Profile != "" {
		n.HostTree = filepath.Join(n.Dir, "host")
		if _, err := run(c.Bins.Fixture, "--profile", n.Spec.Profile, "--out", n.HostTree,
			"--cache", filepath.Join(cacheDir(), "fixture")); err != nil {
			return err
		}
	}
	if err := n.makeCgroups(); err != nil {
		return err
	}
	if err := n.network(); err != nil {
		return err
	}
	if err := n.writeConfigs(); err != nil {
		return err
	}
	os.WriteFile(filepath.Join(n.Dir, "hold"), nil, 0o644)
	var prefix []string
	switch {
	case n.Spec.Profile != "":
		prefix = append([]string{c.Bins.Dxgsim, "--profile", n.Spec.Profile, "--bind-host", n.HostTree}, n.Spec.DxgsimArgs...)
		prefix = append(prefix, "--")
	default:
		prefix = []string{"unshare", "--mount", "--propagation", "private"}
	}
	args := append(prefix, "nsenter", "--net="+n.netns, "--", "sh", "-c", n.script())
	p, err := start("node "+n.Spec.Name, filepath.Join(n.Dir, "node.log"), []string{"PATH=" + c.Bins.Containerd + ":" + c.Bins.Kube + ":" + os.Getenv("PATH")}, args...)
	if err != nil {
		return err
	}
	n.super = p
	deadline := time.Now().Add(time.Minute)
	for {
		if _, err := os.Stat(filepath.Join(n.Dir, "ready")); err == nil {
			break
		}
		if !p.Running() || time.Now().After(deadline) {
			return fmt.Errorf("node %s did not set up:\n%s", n.Spec.Name, tail(p.Log(), 30))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n.Spec.Setup != nil {
		if err := n.Spec.Setup(n); err != nil {
			return fmt.Errorf("node %s setup: %w", n.Spec.Name, err)
		}
	}
	os.Remove(filepath.Join(n.Dir, "hold"))
	deadline = time.Now().Add(time.Minute)
	for {
		if _, err := n.Ctr("version"); err == nil {
			break
		}
		if !p.Running() || time.Now().After(deadline) {
			return fmt.Errorf("node %s: containerd does not answer:\n%s", n.Spec.Name, tail(n.Log("containerd"), 30))
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, img := range c.images {
		if err := n.ImportImage(img); err != nil {
			return err
		}
	}
	return nil
}

// script is what the node's supervisor shell runs: private /run, /var/lib,
// /var/log and /etc (an overlay), the sysctls, the daemons' cgroup, then
// containerd and the kubelet, each restarted when it exits unless
// Dir/stop-NAME exists.
func (n *Node) script() string {
	var b strings.Builder
	D := shellQuote(n.Dir)
	fmt.Fprintf(&b, "set -e\nD=%s\necho $$ > $D/sh.pid\nmount --make-rprivate /\n", D)
	if n.Spec.NoDxg {
		// dxgsim's /dev is an overlay private to the node: the node
		// keeps /usr/lib/wsl and loses /dev/dxg, as WSL with GPU off.
		b.WriteString("rm /dev/dxg\n")
	}
	b.WriteString("for d in /run /var/lib /var/log; do mount -t tmpfs -o mode=755 tmpfs $d; done\n")
	b.WriteString("mount -t tmpfs tmpfs $D/priv\nmkdir -p $D/priv/etc $D/priv/etc-work\n")
	b.WriteString("mount -t overlay overlay -o lowerdir=/etc,upperdir=$D/priv/etc,workdir=$D/priv/etc-work /etc\n")
	if n.Spec.K3s {
		fmt.Fprintf(&b, "mkdir -p /var/lib/kubelet %[1]s/etc/cni/net.d %[1]s/etc/containerd\ncp $D/cni.conflist %[1]s/etc/cni/net.d/10-wgk.conflist\n", k3sAgent)
	} else {
		b.WriteString("mkdir -p /var/lib/kubelet /etc/cni/net.d\nmount -t tmpfs tmpfs /etc/cni/net.d\ncp $D/cni.conflist /etc/cni/net.d/10-wgk.conflist\n")
	}
	sysctlsAndCgroup(&b, "$D/sysctl", n.cgroupRoot)
	b.WriteString("set +e\ntouch $D/ready\nwhile [ -e $D/hold ]; do sleep 0.1; done\n")
	b.WriteString(`supervise() {
	name=$1; shift
	while :; do
		while [ -e $D/stop-$name ]; do sleep 0.2; done
		"$@" >>$D/$name.log 2>&1 &
		echo $! > $D/$name.pid
		wait $!
		echo "node: $name exited ($?)" >>$D/$name.log
		sleep 0.3
	done
}
`)
	if n.Spec.K3s {
		// As k3s's agent: the configuration written again at every start,
		// then containerd with k3s's flags.
		fmt.Fprintf(&b, "supervise containerd sh -c \"cp $D/containerd.toml %[1]s/etc/containerd/config.toml && exec containerd -c %[1]s/etc/containerd/config.toml -a %[2]s --state %[3]s --root %[1]s/containerd\" &\n",
			k3sAgent, k3sSocket, filepath.Dir(k3sSocket))
	} else {
		b.WriteString("supervise containerd containerd --config $D/containerd.toml &\n")
	}
	fmt.Fprintf(&b, "supervise kubelet kubelet --config $D/kubelet.yaml --kubeconfig $D/kubelet.kubeconfig --hostname-override %s --node-ip %s --node-labels %s --v 2 &\n",
		shellQuote(n.Spec.Name), n.IP, shellQuote(n.labels()))
	b.WriteString("wait\n")
	return b.String()
}

func (n *Node) labels() string {
	var l []string
	for k, v := range n.Spec.Labels {
		l = append(l, k+"="+v)
	}
	sort.Strings(l)
	return strings.Join(append(l, "wsl-gpu-hook.dev/test-node="+n.Spec.Name), ",")
}

func (n *Node) writeConfigs() error {
	c := n.c
	kc, err := c.pki.kubeconfig("node-"+n.Spec.Name, c.Server, "system:node:"+n.Spec.Name, "system:nodes")
	if err != nil {
		return err
	}
	data, _ := os.ReadFile(kc)
	files := nodeConfig{
		sock: n.sock, cniBin: c.Bins.CNI, subnet: n.index, cgroupRoot: n.cgroupRoot, ip: n.IP, ca: c.pki.path("ca.crt"),
		containerdExtra: c.opt.ContainerdConfig, kubeletExtra: c.opt.KubeletConfig, k3s: n.Spec.K3s,
	}.files()
	files["kubelet.kubeconfig"] = string(data)
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(n.Dir, name), []byte(content), 0o600); err != nil {
			return err
		}
	}
	return writeSysctls(filepath.Join(n.Dir, "sysctl"))
}

// writeSysctls writes kubeletSysctls' values, one read-only file each, in
// dir: what sysctlsAndCgroup binds over /proc/sys.
func writeSysctls(dir string) error {
	for name, v := range kubeletSysctls {
		if err := os.WriteFile(filepath.Join(dir, strings.ReplaceAll(name, "/", ".")), []byte(v+"\n"), 0o444); err != nil {
			return err
		}
	}
	return nil
}

// sysctlsAndCgroup adds to a node's start script the binds of dir's
// sysctl files (writeSysctls) read-only over /proc/sys, so the kubelet
// finds its values and cannot change the host's, and the move of the
// script into the node's daemons' cgroup under root.
func sysctlsAndCgroup(b *strings.Builder, dir, root string) {
	names := make([]string, 0, len(kubeletSysctls))
	for name := range kubeletSysctls {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		fmt.Fprintf(b, "mount --bind -o ro %s/%s /proc/sys/%s\n", dir, strings.ReplaceAll(name, "/", "."), name)
	}
	for _, ctl := range cgroupControllers {
		p := filepath.Join("/sys/fs/cgroup", ctl, root, "node", "cgroup.procs")
		fmt.Fprintf(b, "[ ! -e %[1]s ] || echo $$ > %[1]s\n", shellQuote(p))
	}
}

// network makes the node's network namespace: eth0 on the cluster's
// bridge, a default route through the host, and the kubernetes Service's
// address forwarded to the API server. A process holds the namespace, not a
// name under /run/netns: `ip netns add` bind-mounts one into the host's
// mount table, where every other test's mount checks see it.
func (n *Node) network() error {
	c := n.c
	holder, netns, err := newNetns(n.Spec.Name, c.Bins.Pause)
	if err != nil {
		return err
	}
	n.holder, n.netns = holder, netns
	apiPort := c.Server[strings.LastIndex(c.Server, ":")+1:]
	in := []string{"nsenter", "--net=" + n.netns, "--"}
	for _, args := range [][]string{
		{"ip", "link", "add", n.veth, "type", "veth", "peer", "name", "eth0", "netns", strconv.Itoa(holder.Pid())},
		{"ip", "link", "set", n.veth, "master", c.bridge, "up"},
		append(in, "ip", "addr", "add", n.IP+"/24", "dev", "eth0"),
		append(in, "ip", "link", "set", "eth0", "up"),
		append(in, "ip", "link", "set", "lo", "up"),
		append(in, "ip", "route", "add", "default", "via", c.hostIP),
		append(in, "iptables", "-t", "nat", "-A", "OUTPUT", "-d", ServiceIP, "-p", "tcp", "--dport", "443", "-j", "DNAT", "--to-destination", c.hostIP+":"+apiPort),
		append(in, "iptables", "-t", "nat", "-A", "PREROUTING", "-d", ServiceIP, "-p", "tcp", "--dport", "443", "-j", "DNAT", "--to-destination", c.hostIP+":"+apiPort),
	} {
		if _, err := run(args...); err != nil {
			return err
		}
	}
	return nil
}

// newNetns starts pause in a new network namespace, which lives as long as
// the returned process, and returns it with the namespace's path.
func newNetns(name, pause string) (*Proc, string, error) {
	holder, err := start("netns "+name, "", nil, "unshare", "--net", "--", pause)
	if err != nil {
		return nil, "", err
	}
	// unshare execs pause once the namespace exists: wait for it to differ
	// from the host's.
	host, _ := os.Readlink("/proc/self/ns/net")
	netns := fmt.Sprintf("/proc/%d/ns/net", holder.Pid())
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if ns, err := os.Readlink(netns); err == nil && ns != host {
			if exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", holder.Pid())); exe == pause {
				return holder, netns, nil
			}
		}
		if !holder.Running() || time.Now().After(deadline) {
			holder.Stop(time.Second)
			return nil, "", fmt.Errorf("node %s: no network namespace:\n%s", name, holder.Log())
		}
	}
}

// makeCgroups creates the node's cgroup root and its daemons' cgroup in
// every hierarchy (a new cpuset starts with no CPUs).
func (n *Node) makeCgroups() error {
	for _, ctl := range cgroupControllers {
		base := filepath.Join("/sys/fs/cgroup", ctl)
		if _, err := os.Stat(base); err != nil {
			continue
		}
		for _, sub := range []string{"", "node"} {
			p := filepath.Join(base, n.cgroupRoot, sub)
			if err := os.MkdirAll(p, 0o755); err != nil {
				return fmt.Errorf("cgroup %s: %w", p, err)
			}
			if ctl == "cpuset" {
				for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
					v, _ := os.ReadFile(filepath.Join(base, f))
					if err := os.WriteFile(filepath.Join(p, f), v, 0o644); err != nil {
						return fmt.Errorf("cgroup %s/%s: %w", p, f, err)
					}
				}
			}
		}
	}
	return nil
}

// Exec runs a command inside the node's mount and network namespaces.
func (n *Node) Exec(args ...string) (string, error) {
	pid, err := os.ReadFile(filepath.Join(n.Dir, "sh.pid"))
	if err != nil {
		return "", err
	}
	return run(append([]string{"nsenter", "--target", strings.TrimSpace(string(pid)), "--mount", "--net", "--"}, args...)...)
}

// Path is node path p as the host sees it, through the node's mount
// namespace: reading it costs no process, so a test can watch a file.
func (n *Node) Path(p string) string {
	pid, _ := os.ReadFile(filepath.Join(n.Dir, "sh.pid"))
	return filepath.Join("/proc", strings.TrimSpace(string(pid)), "root", p)
}

// StartInNet starts args in the node's network namespace (and the host's
// mount namespace), as a program run beside the node, such as a Prometheus
// scraping its pods, would be; its output goes to Dir/NAME.log. The caller
// stops it (Proc.Stop, by its process group).
func (n *Node) StartInNet(name string, args ...string) (*Proc, error) {
	return start(name, filepath.Join(n.Dir, name+".log"), nil, append([]string{"nsenter", "--net=" + n.netns, "--"}, args...)...)
}

// Ctr runs containerd's ctr in the k8s.io namespace of the node's containerd.
func (n *Node) Ctr(args ...string) (string, error) {
	sock := n.sock
	if n.Spec.K3s {
		sock = n.Path(k3sSocket) // in the node's /run
	}
	return run(append([]string{filepath.Join(n.c.Bins.Containerd, "ctr"), "--address", sock, "--namespace", "k8s.io"}, args...)...)
}

// ImportImage imports an image archive into the node's containerd.
func (n *Node) ImportImage(archive string) error {
	_, err := n.Ctr("images", "import", archive)
	return err
}

// Log returns what daemon ("containerd", "kubelet") logged so far.
func (n *Node) Log(daemon string) string {
	data, _ := os.ReadFile(filepath.Join(n.Dir, daemon+".log"))
	return string(data)
}

// Pid is daemon's current process id.
func (n *Node) Pid(daemon string) int {
	data, _ := os.ReadFile(filepath.Join(n.Dir, daemon+".pid"))
	pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	return pid
}

// Restart stops daemon ("containerd", "kubelet") with SIGTERM; the node's
// supervisor starts it again. It returns once a new process runs.
func (n *Node) Restart(daemon string) error {
	old := n.Pid(daemon)
	if old <= 0 {
		return fmt.Errorf("node %s: no %s running", n.Spec.Name, daemon)
	}
	if err := syscall.Kill(old, syscall.SIGTERM); err != nil {
		return err
	}
	deadline := time.Now().Add(time.Minute)
	for n.Pid(daemon) == old {
		if time.Now().After(deadline) {
			return fmt.Errorf("node %s: %s did not restart", n.Spec.Name, daemon)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil
}

// stop kills the node's daemons and whatever runs in its cgroups, removes
// the cgroups and anything left mounted under its dir.
func (n *Node) stop() {
	if n.super != nil {
		os.WriteFile(filepath.Join(n.Dir, "stop-kubelet"), nil, 0o644)
		os.WriteFile(filepath.Join(n.Dir, "stop-containerd"), nil, 0o644)
		n.super.Stop(15 * time.Second)
	}
	for range 5 {
		left := 0
		for _, ctl := range cgroupControllers {
			filepath.WalkDir(filepath.Join("/sys/fs/cgroup", ctl, n.cgroupRoot), func(p string, d os.DirEntry, err error) error {
				if err == nil && d.Name() == "cgroup.procs" {
					data, _ := os.ReadFile(p)
					for _, f := range strings.Fields(string(data)) {
						if pid, _ := strconv.Atoi(f); pid > 1 {
							syscall.Kill(pid, syscall.SIGKILL)
							left++
						}
					}
				}
				return nil
			})
		}
		if left == 0 {
			break
		}
		time.Sleep(300 * time.Millisecond)
	}
	for _, ctl := range cgroupControllers {
		removeCgroupTree(filepath.Join("/sys/fs/cgroup", ctl, n.cgroupRoot))
	}
	// The namespace, and the veth pair in it, go with its last process.
	n.holder.Stop(5 * time.Second)
	if n.veth != "" {
		exec.Command("ip", "link", "del", n.veth).Run()
	}
}

// removeCgroupTree removes a cgroup and its children, deepest first.
func removeCgroupTree(root string) {
	var dirs []string
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := syscall.Rmdir(dirs[i]); err != nil && !errors.Is(err, os.ErrNotExist) {
			fmt.Fprintf(os.Stderr, "cluster: cgroup %s left: %v\n", dirs[i], err)
		}
	}
}

// unmountUnder detaches whatever is still mounted under dir in the
// harness's mount namespace, deepest first.
func unmountUnder(dir string) {
	ms, err := mountinfo.GetMounts(mountinfo.PrefixFilter(dir))
	if err != nil {
		return
	}
	var mps []string
	for _, m := range ms {
		mps = append(mps, m.Mountpoint)
	}
	sort.Sort(sort.Reverse(sort.StringSlice(mps)))
	for _, m := range mps {
		syscall.Unmount(m, syscall.MNT_DETACH)
	}
}

func cacheDir() string {
	if d := os.Getenv("E2E_CACHE"); d != "" {
		return d
	}
	return "/var/cache/wsl-gpu-hook-e2e"
}

// nodeConfig is what a node's containerd, CNI and kubelet configurations
// depend on, for a node on the host and a node in a container alike.
type nodeConfig struct {
	sock       string // containerd's socket
	cniBin     string // the CNI plugins' dir
	subnet     int    // the pod subnet is 10.244.<subnet>.0/24
	cgroupRoot string
	ip         string // the kubelet's address
	ca         string // the cluster CA's path as the kubelet sees it

	containerdExtra, kubeletExtra string // appended to each configuration
	k3s                           bool   // containerd.toml in the shape of k3s's (k3sContainerd)
}

// files returns containerd.toml, cni.conflist and kubelet.yaml.
func (nc nodeConfig) files() map[string]string {
	files := map[string]string{
		"containerd.toml": fmt.Sprintf(`version = 3
root = "/var/lib/containerd"
state = "/run/containerd"
disabled_plugins = ["io.containerd.nri.v1.nri"]
[grpc]
  address = %[1]q
[ttrpc]
  address = %[2]q
[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = %[3]q
[plugins.'io.containerd.cri.v1.runtime']
  enable_cdi = true
  # The pause container asks for oom_score_adj -998, which needs
  # CAP_SYS_RESOURCE; root here may lack it.
  restrict_oom_score_adj = true
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = [%[4]q]
    conf_dir = "/etc/cni/net.d"
%[5]s`, nc.sock, nc.sock+".ttrpc", PauseImage, nc.cniBin, nc.containerdExtra),
		"cni.conflist": fmt.Sprintf(`{"cniVersion": "1.0.0", "name": "wgk", "plugins": [
  {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": true,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.244.%d.0/24"}]], "routes": [{"dst": "0.0.0.0/0"}]}}]}
`, nc.subnet),
		"kubelet.yaml": fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
cgroupRoot: %q
failSwapOn: false
failCgroupV1: false
containerRuntimeEndpoint: unix://%s
address: %s
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: %q}
authorization:
  mode: AlwaysAllow
syncFrequency: 10s
nodeStatusUpdateFrequency: 5s
# A container that exits is started again within seconds, not after the
# default back-off that doubles to five minutes (KubeletCrashLoopBackOffMax,
# beta and on since 1.35): the operation suite restarts containers often.
crashLoopBackOff: {maxContainerRestartPeriod: 2s}
evictionHard:
  memory.available: "1Mi"
  nodefs.available: "1%%"
  imagefs.available: "1%%"
  nodefs.inodesFree: "1%%"
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
localStorageCapacityIsolation: false
protectKernelDefaults: false
makeIPTablesUtilChains: false
resolvConf: ""
%s`, nc.cgroupRoot, nc.sock, nc.ip, nc.ca, nc.kubeletExtra),
	}
	if nc.k3s {
		files["containerd.toml"] = fmt.Sprintf(k3sContainerd, PauseImage, nc.cniBin) + nc.containerdExtra
	}
	return files
}

// shellQuote quotes s for sh.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
