package cluster

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// KindNodeImage is the node image hack/kind/node-image.sh makes with kind's
// own builder: what `kind build node-image` names kindest/node.
const KindNodeImage = "kindest/node:v1.37.2-wsl-gpu-hook"

// KindSpec is a simulated WSL host on which the kind CLI (sigs.k8s.io/kind
// v0.33, hack/kube/build.sh kind) makes clusters through a real engine:
//   - EngineDocker: the Docker 29 daemon with its containerd 2.4 and runc
//     1.5 (hack/engines), as Docker Engine on a WSL distro;
//   - EnginePodman: Debian 13's podman 5.4 with runc 1.5, through kind's
//     podman provider (KIND_EXPERIMENTAL_PROVIDER=podman), rootful.
type KindSpec struct {
	Name    string
	Engine  string
	Profile string
	// DxgsimArgs are extra dxgsim flags (--folder-file ...).
	DxgsimArgs []string
}

// KindHost is the WSL host: the engine runs under dxgsim (the simulated
// /dev/dxg and /usr/lib/wsl, inherited by every container it starts) in
// Debian 13's root (its docker CLI and podman) and a network namespace of
// its own, where kind's network, its nodes and the API server's published
// port live. The kind CLI, kubectl, helm and wsl-gpu-ctl run on the host
// in that network namespace, with `docker` or `podman` on PATH reaching
// the engine as a user's do.
type KindHost struct {
	Spec KindSpec
	// Dir is the host's scratch dir; HostTree the simulated WSL host's
	// files (its usr/lib/wsl), which a driver update changes.
	Dir, HostTree string
	// Kubeconfig is where kind writes the cluster's credentials.
	Kubeconfig string
	Bins       Binaries
	kind       string // hack/kube/build.sh kind's bin dir
	bin        string // the engine's CLI wrapper, first on PATH
	n          *Node  // the network namespace and cgroup plumbing
	engine     *Proc
	goEnv      []string   // GOPATH, GOMODCACHE, GOCACHE as the test has them
	t          testing.TB // Apply's
	stopped    bool
}

// StartKindHost starts spec's engine on a new simulated WSL host; it stops
// in t's cleanup (Stop).
func StartKindHost(t testing.TB, b Binaries, spec KindSpec) *KindHost {
	t.Helper()
	if spec.Engine == "" {
		spec.Engine = EngineDocker
	}
	h := &KindHost{Spec: spec, Dir: t.TempDir(), Bins: b, t: t}
	h.HostTree = filepath.Join(h.Dir, "host")
	h.Kubeconfig = filepath.Join(h.Dir, "kubeconfig")
	h.bin = filepath.Join(h.Dir, "bin")
	h.n = &Node{Spec: NodeSpec{Name: spec.Name}, Dir: h.Dir, cgroupRoot: "/wgk-" + spec.Name}
	t.Cleanup(func() { h.Stop(t) })
	begin := time.Now()
	if err := h.start(); err != nil {
		t.Fatal(err)
	}
	t.Logf("kind host %s: %s up %s after start", spec.Name, spec.Engine, time.Since(begin).Round(time.Second))
	return h
}

func (h *KindHost) start() error {
	b := h.Bins
	out, err := script(b.Root, "hack/engines/build.sh", "dockerd", "containerd", "runc")
	if err != nil {
		return err
	}
	engines := strings.Fields(out)
	if len(engines) != 3 {
		return fmt.Errorf("hack/engines/build.sh printed %q", out)
	}
	if h.kind, err = script(b.Root, "hack/kube/build.sh", "kind"); err != nil {
		return err
	}
	trixie, err := script(b.Root, "hack/engines/root.sh", "trixie")
	if err != nil {
		return err
	}
	for _, v := range []string{"GOPATH", "GOMODCACHE", "GOCACHE"} {
		out, err := exec.Command("go", "env", v).Output()
		if err != nil {
			return fmt.Errorf("go env %s: %w", v, err)
		}
		h.goEnv = append(h.goEnv, v+"="+strings.TrimSpace(string(out)))
	}
	pivot := filepath.Join(h.Dir, "pivotroot")
	if err := GoBuild(b.Root, pivot, "./test/pivotroot"); err != nil {
		return err
	}
	if _, err := run(b.Fixture, "--profile", h.Spec.Profile, "--out", h.HostTree, "--cache", filepath.Join(cacheDir(), "fixture")); err != nil {
		return err
	}
	for _, d := range []string{h.bin, filepath.Join(h.Dir, "log"), filepath.Join(h.Dir, "scratch"), filepath.Join(h.Dir, "req")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := h.n.makeCgroups(); err != nil {
		return err
	}
	if h.n.holder, h.n.netns, err = newNetns(h.Spec.Name, b.Pause); err != nil {
		return err
	}
	if _, err := run("nsenter", "--net="+h.n.netns, "--", "ip", "link", "set", "lo", "up"); err != nil {
		return err
	}
	var sh strings.Builder
	sh.WriteString("set -e\n")
	for _, ctl := range cgroupControllers {
		fmt.Fprintf(&sh, "[ ! -e %[1]s ] || echo $$ > %[1]s\n", filepath.Join("/sys/fs/cgroup", ctl, h.n.cgroupRoot, "node", "cgroup.procs"))
	}
	fmt.Fprintf(&sh, "echo $$ > %s\n", filepath.Join(h.Dir, "engine.pid"))
	// WSL has its kernel's modules at /lib/modules, which kind mounts
	// into its nodes (podman refuses a missing source); Debian's minimal
	// root has none. In the engine's mount namespace only.
	sh.WriteString("mkdir -p /lib/modules\n")
	sock := filepath.Join(h.Dir, "docker.sock")
	var engineArgs []string
	var wrapper string
	switch h.Spec.Engine {
	case EngineDocker:
		sh.WriteString(`exec dockerd "$@"` + "\n")
		engineArgs = []string{"--data-root", filepath.Join(h.Dir, "data"), "--exec-root", filepath.Join(h.Dir, "exec"),
			"--pidfile", filepath.Join(h.Dir, "docker.pid"), "-H", "unix://" + sock, "--storage-driver=overlay2",
			"--cgroup-parent", h.n.cgroupRoot + "/docker"}
		// The docker CLI is Debian 13's (API 1.45: Docker 29 refuses
		// Debian 12's 1.41), in the engine's mount namespace.
		wrapper = fmt.Sprintf("exec nsenter --mount=/proc/$(cat %s)/ns/mnt -- /usr/bin/docker -H unix://%s \"$@\"\n",
			shellQuote(filepath.Join(h.Dir, "engine.pid")), sock)
	case EnginePodman:
		// podman has no daemon: a container gets the simulated /dev/dxg
		// only as a descendant of dxgsim. Every podman call (kind runs
		// them in parallel) is a request this shell, under dxgsim, runs.
		// A finished request's dir goes while the loop may look at it.
		fmt.Fprintf(&sh, `cd %s
set +e
while :; do
  for d in r.*; do
    [ -e "$d/go" ] && [ ! -e "$d/taken" ] || continue
    : > "$d/taken" 2>/dev/null || continue
    ( eval "set -- $(cat "$d/args")"; %s "$@" < "$d/in" > "$d/out" 2> "$d/err"; echo $? > "$d/rc.tmp"; mv "$d/rc.tmp" "$d/rc" ) &
  done
  sleep 0.05
done
`, shellQuote(filepath.Join(h.Dir, "req")), strings.Join(quoteAll(h.podman(engines[2])), " "))
		// Output streams through FIFOs: kind follows `podman logs -f`.
		wrapper = fmt.Sprintf(`d=$(mktemp -d %[1]s/r.XXXXXX)
if [ "$1" = run ]; then shift; set -- run --cgroup-parent %[2]s "$@"; fi
for a; do printf "'%%s' " "$(printf '%%s' "$a" | sed "s/'/'\\''/g")"; done > "$d/args"
cat > "$d/in"
mkfifo "$d/out" "$d/err"
cat "$d/out" & o=$!
cat "$d/err" >&2 & e=$!
: > "$d/go"
wait $o $e
while [ ! -e "$d/rc" ]; do sleep 0.05; done
rc=$(cat "$d/rc"); rm -rf "$d"; exit "$rc"
`, shellQuote(filepath.Join(h.Dir, "req")), shellQuote(h.n.cgroupRoot+"/podman"))
	default:
		return fmt.Errorf("kind host %s: unknown engine %q", h.Spec.Name, h.Spec.Engine)
	}
	if err := os.WriteFile(filepath.Join(h.bin, h.Spec.Engine), []byte("#!/bin/sh\n"+wrapper), 0o755); err != nil {
		return err
	}
	args := []string{"nsenter", "--net=" + h.n.netns, "--",
		b.Dxgsim, "--profile", h.Spec.Profile, "--bind-host", h.HostTree, "--report", filepath.Join(h.Dir, "dxgsim.json")}
	args = append(args, h.Spec.DxgsimArgs...)
	// The cache (kind's node image archive), /tmp (kind's build context
	// and this host's dir) at the same paths inside.
	args = append(args, "--", pivot, "--root", trixie, "--scratch", filepath.Join(h.Dir, "scratch"),
		"--bind", cacheDir(), "--bind", "/tmp", "--", "sh", "-c", sh.String(), h.Spec.Engine)
	args = append(args, engineArgs...)
	path := append(engines, "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
	p, err := start(h.Spec.Engine+" "+h.Spec.Name, filepath.Join(h.Dir, "log", "engine.log"),
		[]string{"PATH=" + strings.Join(path, ":"), "PODMAN_IGNORE_CGROUPSV1_WARNING=1"}, args...)
	if err != nil {
		return err
	}
	h.engine = p
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(300 * time.Millisecond) {
		out, err := h.Engine(nil, "version")
		if err == nil {
			return nil
		}
		if !p.Running() || time.Now().After(deadline) {
			return fmt.Errorf("%s did not come up: %v\n%s\n%s", h.Spec.Engine, err, out, tail(p.Log(), 30))
		}
	}
}

// podman is podman's command line for every call: storage in the host's
// dir, runc 1.5, cgroupfs (the machine's cgroup v1 has no systemd).
func (h *KindHost) podman(runc string) []string {
	return []string{"/usr/bin/podman", "--root", filepath.Join(h.Dir, "data"), "--runroot", filepath.Join(h.Dir, "runroot"),
		"--runtime", filepath.Join(runc, "runc"), "--cgroup-manager", "cgroupfs", "--events-backend", "none"}
}

func quoteAll(args []string) []string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = shellQuote(a)
	}
	return q
}

// Env is the environment of the commands a user runs on the WSL host.
func (h *KindHost) Env() []string {
	env := []string{"PATH=" + strings.Join([]string{h.bin, h.kind, h.Bins.Kube, "/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}, ":"),
		"HOME=" + filepath.Join(h.Dir, "home"), "KUBECONFIG=" + h.Kubeconfig, "TMPDIR=" + filepath.Join(h.Dir, "scratch")}
	if h.Spec.Engine == EnginePodman {
		env = append(env, "KIND_EXPERIMENTAL_PROVIDER=podman")
	}
	// The Go caches stay the machine's ($HOME moved): the network
	// namespace reaches no module proxy.
	return append(env, h.goEnv...)
}

// Run runs args on the WSL host, in its network namespace, with stdin from
// in if not nil, and returns what it printed (stdout and stderr).
func (h *KindHost) Run(in io.Reader, dir string, args ...string) (string, error) {
	var out bytes.Buffer
	err := h.run(in, dir, &out, &out, args...)
	if err != nil {
		return out.String(), fmt.Errorf("%s: %v: %s", strings.Join(args, " "), err, tail(out.String(), 40))
	}
	return out.String(), nil
}

// Output is Run's standard output alone (kind's podman provider says so on
// standard error).
func (h *KindHost) Output(args ...string) (string, error) {
	var out, stderr bytes.Buffer
	if err := h.run(nil, "", &out, &stderr, args...); err != nil {
		return out.String(), fmt.Errorf("%s: %v: %s", strings.Join(args, " "), err, tail(stderr.String(), 40))
	}
	return out.String(), nil
}

func (h *KindHost) run(in io.Reader, dir string, stdout, stderr io.Writer, args ...string) error {
	cmd := exec.Command("nsenter", append([]string{"--net=" + h.n.netns, "--"}, args...)...)
	cmd.Env = h.Env()
	cmd.Dir = dir
	cmd.Stdin = in
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Minute):
		cmd.Process.Kill()
		<-done
		return fmt.Errorf("killed after 10 minutes")
	}
}

// Engine runs the engine's CLI (docker or podman) as a user on the host does.
func (h *KindHost) Engine(in io.Reader, args ...string) (string, error) {
	return h.Run(in, "", append([]string{filepath.Join(h.bin, h.Spec.Engine)}, args...)...)
}

// Kind runs the kind CLI.
func (h *KindHost) Kind(args ...string) (string, error) {
	return h.Run(nil, "", append([]string{filepath.Join(h.kind, "kind")}, args...)...)
}

// Kubectl runs kubectl against the kind cluster; it trims the output.
func (h *KindHost) Kubectl(args ...string) (string, error) {
	out, err := h.Run(nil, "", append([]string{h.Bins.Kubectl()}, args...)...)
	return strings.TrimSpace(out), err
}

// Apply applies manifest (YAML) with kubectl, failing the host's test.
func (h *KindHost) Apply(manifest string) {
	h.t.Helper()
	f := filepath.Join(h.Dir, fmt.Sprintf("apply-%d.yaml", time.Now().UnixNano()))
	if err := os.WriteFile(f, []byte(manifest), 0o644); err != nil {
		h.t.Fatal(err)
	}
	if out, err := h.Kubectl("apply", "-f", f); err != nil {
		h.t.Fatalf("%v\n%s", err, out)
	}
}

// Wait polls cond every second until it holds, failing t after d.
func (h *KindHost) Wait(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !cond(); time.Sleep(time.Second) {
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s:\n%s", d, what, h.Diagnose())
		}
		if !h.engine.Running() {
			t.Fatalf("%s exited while waiting for %s:\n%s", h.Spec.Engine, what, h.Diagnose())
		}
	}
}

// LoadNodeImage makes KindNodeImage with hack/kind/node-image.sh (once per
// version, cached) and loads it into the engine.
func (h *KindHost) LoadNodeImage() error {
	cmd := exec.Command(filepath.Join(h.Bins.Root, "hack/kind/node-image.sh"))
	cmd.Env = append(os.Environ(), "PATH="+h.bin+":"+os.Getenv("PATH"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("hack/kind/node-image.sh: %v\n%s", err, stderr.String())
	}
	archive := strings.TrimSpace(string(out))
	if _, err := h.Engine(nil, "image", "inspect", KindNodeImage); err == nil {
		return nil
	}
	_, err = h.Engine(nil, "load", "-i", archive)
	return err
}

// RouteNodes does for the kind cluster what kindnetd, kind's default CNI,
// does (it cannot be built here, so the clusters run with
// disableDefaultCNI): each node gets a CNI config for the ptp plugin with
// host-local addresses from its podCIDR, as kindnetd writes it, and a route
// to every other node's podCIDR through that node's address.
func (h *KindHost) RouteNodes() error {
	out, err := h.Output(filepath.Join(h.kind, "kind"), "get", "nodes")
	if err != nil {
		return err
	}
	type kindNode struct{ name, ip, cidr string }
	var nodes []kindNode
	for _, name := range strings.Fields(out) {
		ip, err := h.Output(filepath.Join(h.bin, h.Spec.Engine), "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}", name)
		if err != nil || len(strings.Fields(ip)) == 0 {
			return fmt.Errorf("kind node %s: no address: %v %s", name, err, ip)
		}
		var cidr string
		for deadline := time.Now().Add(2 * time.Minute); cidr == ""; time.Sleep(time.Second) {
			cidr, _ = h.Kubectl("get", "node", name, "-o", "jsonpath={.spec.podCIDR}")
			if cidr == "" && time.Now().After(deadline) {
				return fmt.Errorf("kind node %s: no podCIDR:\n%s", name, h.Diagnose())
			}
		}
		nodes = append(nodes, kindNode{name, strings.Fields(ip)[0], cidr})
	}
	for _, n := range nodes {
		conf := fmt.Sprintf(`{"cniVersion": "1.0.0", "name": "kindnet", "plugins": [
  {"type": "ptp", "ipMasq": false, "mtu": 1500, "ipam": {"type": "host-local", "dataDir": "/run/cni-ipam-state",
    "routes": [{"dst": "0.0.0.0/0"}], "ranges": [[{"subnet": %q}]]}},
  {"type": "portmap", "capabilities": {"portMappings": true}}]}
`, n.cidr)
		if out, err := h.Engine(strings.NewReader(conf), "exec", "-i", n.name, "sh", "-c", "mkdir -p /etc/cni/net.d && cat > /etc/cni/net.d/10-kindnet.conflist"); err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		for _, o := range nodes {
			if o.name == n.name {
				continue
			}
			if out, err := h.Engine(nil, "exec", n.name, "ip", "route", "replace", o.cidr, "via", o.ip); err != nil {
				return fmt.Errorf("%v: %s", err, out)
			}
		}
	}
	return nil
}

// State is what a kind cluster may leave on the WSL host, to compare
// before and after one: the engine's containers, volumes and networks
// (less "kind", which kind keeps for the next cluster by design), the
// mounts in the engine's mount namespace (less podman's /run/netns), the files this project writes
// on a host (CDI dirs, the hook's dir), and the simulated Windows files.
func (h *KindHost) State() string {
	var b strings.Builder
	for _, q := range [][]string{{"ps", "-a", "--format", "{{.Names}}"}, {"volume", "ls", "-q"}, {"network", "ls", "--format", "{{.Name}}"}} {
		out, err := h.Output(append([]string{filepath.Join(h.bin, h.Spec.Engine)}, q...)...)
		if err != nil {
			fmt.Fprintf(&b, "%s: %v\n", strings.Join(q, " "), err)
			continue
		}
		var names []string
		for _, l := range strings.Fields(out) {
			if l != "kind" {
				names = append(names, l)
			}
		}
		sort.Strings(names)
		for _, n := range names {
			fmt.Fprintf(&b, "%s: %s\n", q[0], n)
		}
	}
	pid, _ := os.ReadFile(filepath.Join(h.Dir, "engine.pid"))
	mi, _ := os.ReadFile("/proc/" + strings.TrimSpace(string(pid)) + "/mountinfo")
	var mounts []string
	for _, l := range strings.Split(string(mi), "\n") {
		// podman makes /run/netns a mount point for its first network
		// namespace and keeps it, as `ip netns` does.
		if f := strings.Fields(l); len(f) > 4 && f[4] != "/run/netns" {
			mounts = append(mounts, f[4])
		}
	}
	sort.Strings(mounts)
	for _, m := range mounts {
		fmt.Fprintf(&b, "mount: %s\n", m)
	}
	out, _ := run("nsenter", "--mount=/proc/"+strings.TrimSpace(string(pid))+"/ns/mnt", "--", "sh", "-c",
		"ls -A /etc/cdi /var/run/cdi /run/cdi /var/lib/wsl-gpu-hook 2>&1; true")
	fmt.Fprintf(&b, "host files:\n%s", out)
	filepath.WalkDir(h.HostTree, func(p string, d os.DirEntry, err error) error {
		if err == nil {
			if info, err := d.Info(); err == nil {
				fmt.Fprintf(&b, "%s %v %d\n", strings.TrimPrefix(p, h.HostTree), info.Mode(), info.Size())
			}
		}
		return nil
	})
	return b.String()
}

// Diagnose is the engine's log and the kind nodes' states.
func (h *KindHost) Diagnose() string {
	var b strings.Builder
	fmt.Fprintf(&b, "--- %s on kind host %s:\n%s\n", h.Spec.Engine, h.Spec.Name, tail(h.engine.Log(), 20))
	out, _ := h.Engine(nil, "ps", "-a")
	fmt.Fprintf(&b, "--- containers:\n%s\n", out)
	out, _ = h.Kubectl("get", "nodes,pods", "-A", "-o", "wide")
	fmt.Fprintf(&b, "--- cluster:\n%s\n", out)
	return b.String()
}

// Stop stops the engine, kills whatever is left in the host's cgroups and
// removes them and the network namespace. It fails t if dxgsim saw
// protocol misuse.
func (h *KindHost) Stop(t testing.TB) {
	if h.stopped {
		return
	}
	h.stopped = true
	if h.engine != nil {
		stopUnderDxgsim(t, h.engine, "kind host "+h.Spec.Name)
	}
	if h.n.holder != nil {
		h.n.stop()
	}
	unmountUnder(h.Dir)
}
