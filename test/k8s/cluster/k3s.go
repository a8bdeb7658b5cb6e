package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Where a k3s agent keeps its containerd: the socket and state under /run
// (a tmpfs, gone at every boot), the rest under /var/lib/rancher (disk).
const (
	k3sSocket = "/run/k3s/containerd/containerd.sock"
	k3sAgent  = "/var/lib/rancher/k3s/agent"
)

// k3sContainerd is a k3s node's containerd.toml (NodeSpec.K3s): the shape
// k3s's v3 template generates for containerd 2.x, as test/engines'
// rancher-k3s-containerd.toml has it, not k3s's own template. Like k3s's, it
// says nothing about CDI: containerd 2.x has it on, reading /etc/cdi and
// /var/run/cdi. Unlike k3s's: the pause image is the harness's
// (PauseImage), the CNI plugins are the harness's (k3s runs flannel's from
// its data dir) with the node's bridge configuration in k3s's conf dir.
// Its arguments: the pause image and the CNI plugins' dir.
const k3sContainerd = `version = 3
root = "/var/lib/rancher/k3s/agent/containerd"
state = "/run/k3s/containerd"

[grpc]
  address = "/run/k3s/containerd/containerd.sock"

[plugins.'io.containerd.internal.v1.opt']
  path = "/var/lib/rancher/k3s/agent/containerd"

[plugins.'io.containerd.grpc.v1.cri']
  stream_server_address = "127.0.0.1"
  stream_server_port = "10010"

[plugins.'io.containerd.cri.v1.runtime']
  enable_selinux = false
  enable_unprivileged_ports = true
  enable_unprivileged_icmp = true
  # As the harness's other nodes: root here may lack CAP_SYS_RESOURCE.
  restrict_oom_score_adj = true

[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
  SystemdCgroup = false

[plugins.'io.containerd.cri.v1.runtime'.cni]
  bin_dirs = [%[2]q]
  conf_dir = "/var/lib/rancher/k3s/agent/etc/cni/net.d"

[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  disable_snapshot_annotations = true

[plugins.'io.containerd.cri.v1.images'.pinned_images]
  sandbox = %[1]q

[plugins.'io.containerd.cri.v1.images'.registry]
  config_path = "/var/lib/rancher/k3s/agent/etc/containerd/certs.d"
`

// Reboot does to the node what a reboot of its host does: the kubelet and
// containerd stop, every container of the node dies, what is mounted under
// /run (/var/run: a tmpfs) and the pods' volumes is unmounted and /run is
// a new, empty tmpfs (the CDI specs in /var/run/cdi go with it, and on a
// K3s node k3s's containerd state and socket under /run/k3s), while
// /var/lib and /etc (the disk) stay; then containerd and the kubelet start
// again, each by its node's supervisor. The simulated Windows host
// (dxgsim) keeps running. It returns once both daemons run again.
func (n *Node) Reboot() error {
	daemons := []string{"kubelet", "containerd"}
	old := map[string]int{}
	for _, d := range daemons {
		if err := os.WriteFile(filepath.Join(n.Dir, "stop-"+d), nil, 0o644); err != nil {
			return err
		}
		old[d] = n.Pid(d)
	}
	defer func() {
		for _, d := range daemons {
			os.Remove(filepath.Join(n.Dir, "stop-"+d))
		}
	}()
	for _, d := range daemons {
		pid := old[d]
		if pid <= 0 {
			return fmt.Errorf("node %s: no %s running", n.Spec.Name, d)
		}
		syscall.Kill(pid, syscall.SIGTERM)
		if err := waitGone(pid, 30*time.Second); err != nil {
			syscall.Kill(pid, syscall.SIGKILL)
			if err := waitGone(pid, 5*time.Second); err != nil {
				return fmt.Errorf("node %s: %s: %w", n.Spec.Name, d, err)
			}
		}
	}
	if err := n.killAllButSupervisor(); err != nil {
		return err
	}
	// Mount points deepest first: the containers' root file systems,
	// shm and network namespaces under /run, the pods' volumes, then /run.
	if out, err := n.Exec("sh", "-c", `set -e
for m in $(awk '$5 ~ "^/run(/|$)" || $5 ~ "^/var/lib/kubelet/pods/" {print $5}' /proc/self/mountinfo | sort -r); do umount -l "$m"; done
mount -t tmpfs -o mode=755 tmpfs /run`); err != nil {
		return fmt.Errorf("node %s: empty /run: %w\n%s", n.Spec.Name, err, out)
	}
	for _, d := range daemons {
		os.Remove(filepath.Join(n.Dir, "stop-"+d))
	}
	deadline := time.Now().Add(time.Minute)
	for _, d := range daemons {
		for p := n.Pid(d); p == old[d] || p <= 0 || syscall.Kill(p, 0) != nil; p = n.Pid(d) {
			if time.Now().After(deadline) {
				return fmt.Errorf("node %s: %s did not start again:\n%s", n.Spec.Name, d, tail(n.Log(d), 20))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return nil
}

// killAllButSupervisor kills every process in the node's cgroups but its
// supervisor shell, the shells it runs each daemon from and their sleeps:
// the containers, their shims, whatever containerd or the kubelet left.
func (n *Node) killAllButSupervisor() error {
	data, err := os.ReadFile(filepath.Join(n.Dir, "sh.pid"))
	if err != nil {
		return err
	}
	super, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	for try := 0; ; try++ {
		keep := map[int]bool{super: true}
		pids := n.procs()
		// The supervisor's own shells and sleeps, down its tree.
		for grew := true; grew; {
			grew = false
			for _, pid := range pids {
				if keep[pid] {
					continue
				}
				comm, ppid := procStat(pid)
				if keep[ppid] && (comm == "sh" || comm == "sleep") {
					keep[pid], grew = true, true
				}
			}
		}
		left := 0
		for _, pid := range pids {
			if !keep[pid] {
				syscall.Kill(pid, syscall.SIGKILL)
				left++
			}
		}
		if left == 0 {
			return nil
		}
		if try == 50 {
			return fmt.Errorf("node %s: %d processes outlive the reboot", n.Spec.Name, left)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// procs lists the processes in the node's cgroups, in every hierarchy.
func (n *Node) procs() []int {
	seen := map[int]bool{}
	var pids []int
	for _, ctl := range cgroupControllers {
		filepath.WalkDir(filepath.Join("/sys/fs/cgroup", ctl, n.cgroupRoot), func(p string, d os.DirEntry, err error) error {
			if err == nil && d.Name() == "cgroup.procs" {
				data, _ := os.ReadFile(p)
				for _, f := range strings.Fields(string(data)) {
					if pid, _ := strconv.Atoi(f); pid > 1 && !seen[pid] {
						seen[pid] = true
						pids = append(pids, pid)
					}
				}
			}
			return nil
		})
	}
	return pids
}

// procStat returns a process's command name and parent.
func procStat(pid int) (string, int) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", 0
	}
	s := string(data)
	open, close := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || close < open {
		return "", 0
	}
	f := strings.Fields(s[close+1:])
	if len(f) < 2 {
		return "", 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return s[open+1 : close], ppid
}

// waitGone waits until process pid has exited (and was reaped).
func waitGone(pid int, d time.Duration) error {
	for deadline := time.Now().Add(d); ; time.Sleep(50 * time.Millisecond) {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("process %d still runs after %s", pid, d)
		}
	}
}
