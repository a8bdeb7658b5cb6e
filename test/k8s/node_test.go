package k8s

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/sys/mountinfo"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	cri "k8s.io/cri-api/pkg/apis/runtime/v1"
	podresources "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// node is a kubelet, containerd and the device plugin on the simulated host.
type node struct {
	e          *env
	name       string
	cgroupRoot string // under every v1 hierarchy
	manifests  string // the kubelet's static pod dir
	kubeletDir string // --root-dir
	logsDir    string
	sock       string // containerd's CRI socket
	roPort     int    // the kubelet's read-only HTTP port

	containerd, kubelet, plugin *proc
	kubeletCfg                  string
}

// cgroupControllers are the v1 hierarchies the kubelet and runc use here.
var cgroupControllers = []string{"cpu", "cpuacct", "cpuset", "memory", "devices", "freezer", "blkio", "pids", "systemd"}

func newNode(t *testing.T, e *env) *node {
	n := &node{e: e, name: "wslgpu-node", cgroupRoot: "/" + filepath.Base(e.dir),
		manifests: filepath.Join(e.dir, "manifests"), kubeletDir: filepath.Join(e.dir, "kubelet"),
		logsDir: filepath.Join(e.dir, "pods"), sock: filepath.Join(e.dir, "containerd.sock")}
	for _, d := range []string{n.manifests, n.kubeletDir, n.logsDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	n.makeCgroupRoot(t)
	t.Cleanup(func() { n.teardown(t) })
	return n
}

// makeCgroupRoot creates the test's parent cgroup in every hierarchy: the
// kubelet refuses a cgroup root that does not exist, and a new cpuset
// starts with no CPUs.
func (n *node) makeCgroupRoot(t *testing.T) {
	for _, c := range cgroupControllers {
		base := filepath.Join("/sys/fs/cgroup", c)
		if _, err := os.Stat(base); err != nil {
			continue
		}
		p := filepath.Join(base, n.cgroupRoot)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatalf("cgroup %s: %v", p, err)
		}
		if c == "cpuset" {
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				v, _ := os.ReadFile(filepath.Join(base, f))
				if err := os.WriteFile(filepath.Join(p, f), v, 0o644); err != nil {
					t.Fatalf("cgroup %s/%s: %v", p, f, err)
				}
			}
		}
	}
}

// startContainerd runs containerd 2.4 with CDI on, under dxgsim (so the
// shims, runc and the containers see the simulated /dev/dxg), in a private
// mount namespace with a fresh /run: the shims' sockets and runc's state
// never touch the host's /run.
func (n *node) startContainerd(t *testing.T) {
	e := n.e
	cfg := fmt.Sprintf(`version = 3
root = %[1]q
state = %[2]q
disabled_plugins = ["io.containerd.nri.v1.nri"]
[grpc]
  address = %[3]q
[ttrpc]
  address = %[4]q
[plugins.'io.containerd.internal.v1.opt']
  path = %[5]q
[plugins.'io.containerd.cri.v1.images']
  snapshotter = "native"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "docker.io/library/wslgpu-pause:latest"
[plugins.'io.containerd.cri.v1.runtime']
  enable_cdi = true
  cdi_spec_dirs = [%[6]q]
  # The pause container asks for oom_score_adj -998, which needs
  # CAP_SYS_RESOURCE; this sandbox's root may lack it.
  restrict_oom_score_adj = true
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = [%[7]q]
    conf_dir = %[8]q
`, filepath.Join(e.dir, "containerd", "root"), filepath.Join(e.dir, "containerd", "state"), n.sock, n.sock+".ttrpc",
		filepath.Join(e.dir, "containerd", "opt"), e.cdiDir, filepath.Join(e.dir, "cni", "bin"), filepath.Join(e.dir, "cni", "conf"))
	path := filepath.Join(e.dir, "containerd.toml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	pathEnv := "PATH=" + e.containerd + ":" + e.bin + ":" + os.Getenv("PATH")
	n.containerd = start(t, "containerd", []string{pathEnv, "WSL_GPU_HOOK_CONFIG=" + e.config},
		filepath.Join(e.bin, "dxgsim"), "--profile", profile, "--dev", e.dev, "--",
		"unshare", "--mount", "--propagation", "private", "sh", "-c", `mount -t tmpfs tmpfs /run && exec "$@"`, "sh",
		filepath.Join(e.containerd, "containerd"), "--config", path)
	ctr := func(args ...string) (string, error) {
		out, err := exec.Command(filepath.Join(e.containerd, "ctr"), append([]string{"--address", n.sock, "--namespace", "k8s.io"}, args...)...).CombinedOutput()
		return string(out), err
	}
	waitFor(t, time.Minute, "containerd to answer", func() bool { _, err := ctr("version"); return err == nil }, n.containerd)
	for _, tag := range []string{"docker.io/library/wslgpu-pause:latest", "docker.io/library/wslgpu-test:latest"} {
		archive := filepath.Join(e.dir, "image.tar")
		if err := dockerArchive(e.rootfs, tag, archive); err != nil {
			t.Fatal(err)
		}
		if out, err := ctr("images", "import", archive); err != nil {
			t.Fatalf("ctr import %s: %v\n%s", tag, err, out)
		}
		os.Remove(archive)
	}
}

// writeCDISpec writes the spec `wsl-gpu-hook cdi generate` makes (under
// dxgsim: it enumerates) and, if the generator does not yet name the
// nvidia.com/gpu kind, a stand-in for it with the same edits as the
// generator's "nvidia" device: the kind the device plugin answers with.
func (n *node) writeCDISpec(t *testing.T) {
	e := n.e
	generate := func(args ...string) ([]byte, error) {
		return exec.Command(filepath.Join(e.bin, "dxgsim"), append([]string{"--profile", profile, "--dev", filepath.Join(e.dir, "dev", "dxg-gen"), "--",
			filepath.Join(e.bin, "wsl-gpu-hook"), "--config", e.config, "cdi", "generate"}, args...)...).CombinedOutput()
	}
	// Generators that write every kind take --dir; older ones one file.
	if _, err := generate("--dir", e.cdiDir); err != nil {
		if out, err := generate("--output", filepath.Join(e.cdiDir, "wsl-gpu-hook.json")); err != nil {
			t.Fatalf("cdi generate: %v\n%s", err, out)
		}
	}
	files, _ := filepath.Glob(filepath.Join(e.cdiDir, "*.json"))
	type device struct {
		Name           string          `json:"name"`
		ContainerEdits json.RawMessage `json:"containerEdits"`
	}
	type cdiSpec struct {
		Version        string          `json:"cdiVersion"`
		Kind           string          `json:"kind"`
		Devices        []device        `json:"devices"`
		ContainerEdits json.RawMessage `json:"containerEdits,omitempty"`
	}
	var generic *cdiSpec
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var s cdiSpec
		if err := json.Unmarshal(data, &s); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if s.Kind == "nvidia.com/gpu" {
			return
		}
		if s.Kind == "wsl-gpu-hook.dev/gpu" {
			generic = &s
		}
	}
	if generic == nil {
		t.Fatalf("cdi generate wrote no wsl-gpu-hook.dev/gpu spec in %s", e.cdiDir)
	}
	nv := cdiSpec{Version: generic.Version, Kind: "nvidia.com/gpu", ContainerEdits: generic.ContainerEdits}
	for _, d := range generic.Devices {
		if d.Name == "nvidia" {
			nv.Devices = append(nv.Devices, device{Name: "0", ContainerEdits: d.ContainerEdits}, device{Name: "all", ContainerEdits: d.ContainerEdits})
		}
	}
	if len(nv.Devices) == 0 {
		t.Fatalf("the generated spec has no nvidia device")
	}
	data, _ := json.MarshalIndent(nv, "", "  ")
	if err := os.WriteFile(filepath.Join(e.cdiDir, "nvidia-standin.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// startPlugin runs the device plugin under its own dxgsim (the simulated
// node is told by its device numbers, so it opens containerd's node too).
func (n *node) startPlugin(t *testing.T) { n.startPluginWith(t, n.e.config) }

func (n *node) startPluginWith(t *testing.T, config string) {
	e := n.e
	n.plugin = start(t, "device plugin", nil,
		filepath.Join(e.bin, "dxgsim"), "--profile", profile, "--dev", filepath.Join(e.dir, "dev", "dxg-plugin"), "--",
		filepath.Join(e.bin, "wsl-gpu-device-plugin"), "--config", config,
		"--plugin-dir", filepath.Join(n.kubeletDir, "device-plugins"), "--interval", "1s",
		"--feature-file", filepath.Join(e.dir, "features.d", "wsl-gpu-hook"))
}

// startKubelet runs the kubelet standalone: no API server, static pods
// from n.manifests, containerd over CRI, cgroupfs under the test's parent.
func (n *node) startKubelet(t *testing.T) {
	if n.kubeletCfg == "" {
		n.roPort = freePort(t)
		cfg := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
staticPodPath: %q
fileCheckFrequency: 1s
syncFrequency: 5s
cgroupDriver: cgroupfs
cgroupRoot: %q
failSwapOn: false
failCgroupV1: false
containerRuntimeEndpoint: unix://%s
address: 127.0.0.1
port: %d
readOnlyPort: %d
healthzBindAddress: 127.0.0.1
healthzPort: %d
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization:
  mode: AlwaysAllow
podLogsDir: %q
registerNode: false
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
`, n.manifests, n.cgroupRoot, n.sock, freePort(t), n.roPort, freePort(t), n.logsDir)
		n.kubeletCfg = filepath.Join(n.e.dir, "kubelet.yaml")
		if err := os.WriteFile(n.kubeletCfg, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	n.kubelet = start(t, "kubelet", nil, append(kubeletJail(t, n.e.dir), n.e.kubelet, "--config", n.kubeletCfg, "--root-dir", n.kubeletDir,
		"--cert-dir", filepath.Join(n.kubeletDir, "pki"), "--hostname-override", n.name, "--v", "2")...)
}

// kubeletSysctls are the values the kubelet sets on the host unless it
// already finds them (pkg/kubelet/cm setupKernelTunables): overcommit,
// panic on oops, reboot 10 s after a panic. A shared test machine must not
// get those, so the kubelet reads them from files instead.
var kubeletSysctls = map[string]string{
	"vm/overcommit_memory":      "1",
	"vm/panic_on_oom":           "0",
	"kernel/panic":              "10",
	"kernel/panic_on_oops":      "1",
	"kernel/keys/root_maxkeys":  "1000000",
	"kernel/keys/root_maxbytes": "25000000",
}

// kubeletJail is the command prefix that runs the kubelet in a private
// mount namespace where the sysctls it wants are already set (bind-mounted
// files) and /run, /var/log and /var/lib are fresh tmpfs: it writes symlinks
// into /var/log/containers, its device plugin socket under /var/lib/kubelet
// and state under /run, none of which may reach the host. (Its network
// namespace is the host's: makeIPTablesUtilChains: false keeps it from
// adding KUBE-* chains and a DROP rule to the host's iptables.)
func kubeletJail(t *testing.T, dir string) []string {
	sys := filepath.Join(dir, "sysctl")
	// The device plugin dir is fixed (/var/lib/kubelet/device-plugins, not
	// under --root-dir): /var/lib is a tmpfs here and the dir a bind mount
	// of the test's, where the plugin, outside, finds the sockets.
	plugins := filepath.Join(dir, "kubelet", "device-plugins")
	if err := os.MkdirAll(plugins, 0o750); err != nil {
		t.Fatal(err)
	}
	script := "set -e; mount -t tmpfs tmpfs /run; mount -t tmpfs tmpfs /var/log; mount -t tmpfs tmpfs /var/lib; " +
		"mkdir -p /var/lib/kubelet/device-plugins; mount --bind " + plugins + " /var/lib/kubelet/device-plugins; "
	for name, v := range kubeletSysctls {
		f := filepath.Join(sys, strings.ReplaceAll(name, "/", "."))
		if err := os.MkdirAll(sys, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte(v+"\n"), 0o444); err != nil {
			t.Fatal(err)
		}
		script += fmt.Sprintf("mount --bind -o ro %s /proc/sys/%s; ", f, name)
	}
	return []string{"unshare", "--mount", "--propagation", "private", "sh", "-c", script + `exec "$@"`, "sh"}
}

// pod is what the kubelet's /pods says about one pod.
type pod struct {
	Metadata struct {
		Name string `json:"name"`
		UID  string `json:"uid"`
	} `json:"metadata"`
	Status struct {
		Phase             string `json:"phase"`
		Reason            string `json:"reason"`
		Message           string `json:"message"`
		ContainerStatuses []struct {
			Name  string `json:"name"`
			State struct {
				Running    *struct{} `json:"running"`
				Terminated *struct {
					ExitCode int    `json:"exitCode"`
					Reason   string `json:"reason"`
				} `json:"terminated"`
				Waiting *struct {
					Reason  string `json:"reason"`
					Message string `json:"message"`
				} `json:"waiting"`
			} `json:"state"`
		} `json:"containerStatuses"`
	} `json:"status"`
}

// pods lists the kubelet's pods by name (static pods are <name>-<node>).
func (n *node) pods() map[string]pod {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/pods", n.roPort))
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var list struct {
		Items []pod `json:"items"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return nil
	}
	out := map[string]pod{}
	for _, p := range list.Items {
		out[strings.TrimSuffix(p.Metadata.Name, "-"+n.name)] = p
	}
	return out
}

// addPod writes a static pod manifest.
func (n *node) addPod(t *testing.T, name, manifest string) {
	if err := os.WriteFile(filepath.Join(n.manifests, name+".yaml"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (n *node) removePod(t *testing.T, name string) {
	os.Remove(filepath.Join(n.manifests, name+".yaml"))
	waitFor(t, 2*time.Minute, "pod "+name+" to go", func() bool {
		_, ok := n.pods()[name]
		return !ok
	}, n.kubelet)
}

// containerLog reads a container's log as the kubelet wrote it (CRI
// format: time, stream, tag, text), returning the text.
func (n *node) containerLog(p pod, container string) string {
	files, _ := filepath.Glob(filepath.Join(n.logsDir, "*_"+p.Metadata.Name+"_"+p.Metadata.UID, container, "*.log"))
	var b strings.Builder
	for _, f := range files {
		data, _ := os.ReadFile(f)
		for _, l := range strings.Split(string(data), "\n") {
			if parts := strings.SplitN(l, " ", 4); len(parts) == 4 {
				b.WriteString(parts[3] + "\n")
			}
		}
	}
	return b.String()
}

// podResources dials the kubelet's pod-resources API: what the node can
// allocate (healthy devices) and what each running container holds.
func (n *node) podResources(t *testing.T) (podresources.PodResourcesListerClient, func()) {
	conn, err := grpc.NewClient("unix://"+filepath.Join(n.kubeletDir, "pod-resources", "kubelet.sock"),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	return podresources.NewPodResourcesListerClient(conn), func() { conn.Close() }
}

// allocatable returns the device IDs the kubelet can allocate for resource,
// or nil when it cannot be asked.
func (n *node) allocatable(t *testing.T, resource string) []string {
	c, done := n.podResources(t)
	defer done()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := c.GetAllocatableResources(ctx, &podresources.AllocatableResourcesRequest{})
	if err != nil {
		return nil
	}
	ids := []string{}
	for _, d := range resp.Devices {
		if d.ResourceName == resource {
			ids = append(ids, d.DeviceIds...)
		}
	}
	sort.Strings(ids)
	return ids
}

// assigned returns the device IDs of resource a pod's containers hold.
func (n *node) assigned(t *testing.T, podName, resource string) []string {
	c, done := n.podResources(t)
	defer done()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := c.List(ctx, &podresources.ListPodResourcesRequest{})
	if err != nil {
		t.Fatalf("pod resources List: %v", err)
	}
	var ids []string
	for _, p := range resp.PodResources {
		if p.Name != podName+"-"+n.name {
			continue
		}
		for _, c := range p.Containers {
			for _, d := range c.Devices {
				if d.ResourceName == resource {
					ids = append(ids, d.DeviceIds...)
				}
			}
		}
	}
	return ids
}

// teardown stops every pod through CRI (the kubelet leaves containers
// running when it stops), the daemons, any process left in the test's
// cgroups, and removes the cgroups.
func (n *node) teardown(t *testing.T) {
	if n.kubelet != nil {
		n.kubelet.stop()
	}
	if n.plugin != nil {
		n.plugin.stop()
	}
	if n.containerd != nil && n.containerd.running() {
		if conn, err := grpc.NewClient("unix://"+n.sock, grpc.WithTransportCredentials(insecure.NewCredentials())); err == nil {
			rt := cri.NewRuntimeServiceClient(conn)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			if list, err := rt.ListPodSandbox(ctx, &cri.ListPodSandboxRequest{}); err == nil {
				for _, s := range list.Items {
					rt.StopPodSandbox(ctx, &cri.StopPodSandboxRequest{PodSandboxId: s.Id})
					rt.RemovePodSandbox(ctx, &cri.RemovePodSandboxRequest{PodSandboxId: s.Id})
				}
			}
			cancel()
			conn.Close()
		}
		n.containerd.stop()
	}
	// Whatever is left (shims, containers) dies with its cgroup.
	for range 3 {
		for _, c := range cgroupControllers {
			filepath.WalkDir(filepath.Join("/sys/fs/cgroup", c, n.cgroupRoot), func(p string, d os.DirEntry, err error) error {
				if err == nil && d.Name() == "cgroup.procs" {
					data, _ := os.ReadFile(p)
					for _, f := range strings.Fields(string(data)) {
						var pid int
						fmt.Sscan(f, &pid)
						if pid > 1 {
							syscall.Kill(pid, syscall.SIGKILL)
						}
					}
				}
				return nil
			})
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, c := range cgroupControllers {
		removeCgroupTree(filepath.Join("/sys/fs/cgroup", c, n.cgroupRoot))
	}
	// The kubelet may have mounted under its root dir (pod volumes).
	if ms, err := mountinfo.GetMounts(mountinfo.PrefixFilter(n.e.dir)); err == nil {
		var mps []string
		for _, m := range ms {
			if strings.HasPrefix(m.Mountpoint, n.e.dir+"/") {
				mps = append(mps, m.Mountpoint)
			}
		}
		sort.Sort(sort.Reverse(sort.StringSlice(mps)))
		for _, m := range mps {
			syscall.Unmount(m, syscall.MNT_DETACH)
		}
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
			fmt.Fprintf(os.Stderr, "k8s test: cgroup %s left: %v\n", dirs[i], err)
		}
	}
}
