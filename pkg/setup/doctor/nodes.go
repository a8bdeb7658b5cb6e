package doctor

import (
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/kube/nodesetup"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/setup/cdispec"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/wsl"
)

// tool is a program that runs Kubernetes nodes as containers, as its
// labels and its commands know it.
type tool struct {
	name string
	// cluster is the label every container of the tool carries: its
	// cluster's (or minikube's profile's) name.
	cluster string
	// role is the label naming what a container is; nodeRoles are the
	// roles that are Kubernetes nodes (kind's and k3d's load balancers,
	// k3d's registry and tools containers are not). "" takes every one.
	role      string
	nodeRoles []string
	// recreate is the command that makes the cluster anew with what the
	// GPU needs; load puts the chart's image into its nodes. %s is the
	// cluster's name, which names() has checked.
	recreate, load string
	// names reports whether a cluster name is one the tool makes: each
	// allows only characters no shell treats specially, and no leading
	// "-", so a name goes into the fix lines as it is.
	names func(string) bool
	// named reports whether a container name is one the tool gives a
	// node of cluster in role: a container's name is set by whoever ran
	// it, never by its image.
	named func(name, cluster, role string) bool
}

// hookGPUs is what makes minikube and k3d nodes GPU nodes: Docker's
// --gpus, which the hook serves once `install docker` linked it.
const hookGPUs = "sudo wsl-gpu-hook install docker && sudo systemctl restart docker, then "

// kindMount is the kind config's stanza docs/kubernetes.md gives.
const kindMount = "extraMounts: [{hostPath: /usr/lib/wsl, containerPath: /usr/lib/wsl, readOnly: true}]"

func tools() []tool {
	return []tool{
		{name: "kind", cluster: "io.x-k8s.kind.cluster", role: "io.x-k8s.kind.role", nodeRoles: []string{"control-plane", "worker"},
			recreate: "kind delete cluster --name %[1]s && kind create cluster --name %[1]s --config FILE",
			load:     "kind load image-archive bin/wsl-gpu-hook-image.tar --name %s",
			// kind's own rule, [a-z0-9.-], and a container name's first
			// character. Nodes: NAME-control-plane, NAME-worker,
			// NAME-worker2, ...
			names: func(s string) bool { return nameOf(s, lower+digits+".-") },
			named: func(name, cluster, role string) bool {
				rest, ok := strings.CutPrefix(name, cluster+"-"+role)
				return ok && numbered(rest, "")
			}},
		{name: "minikube", cluster: "name.minikube.sigs.k8s.io",
			recreate: "minikube delete -p %[1]s && minikube start -p %[1]s --driver docker --container-runtime containerd --gpus all",
			load:     "minikube image load bin/wsl-gpu-hook-image.tar -p %s",
			// A profile name is a container name: PROFILE, then
			// PROFILE-m02, PROFILE-m03, ...
			names: func(s string) bool { return nameOf(s, lower+upper+digits+"._-") },
			named: func(name, cluster, _ string) bool {
				rest, ok := strings.CutPrefix(name, cluster)
				return ok && (rest == "" || numbered(rest, "-m") && len(rest) >= len("-m02"))
			}},
		{name: "k3d", cluster: "k3d.cluster", role: "k3d.role", nodeRoles: []string{"server", "agent"},
			recreate: "k3d cluster delete %[1]s && k3d cluster create %[1]s --gpus all",
			load:     "k3d image import bin/wsl-gpu-hook-image.tar -c %s",
			// k3d's names are DNS labels. Nodes: k3d-NAME-server-0, ...
			names: func(s string) bool { return nameOf(s, lower+digits+"-") },
			named: func(name, cluster, role string) bool {
				rest, ok := strings.CutPrefix(name, "k3d-"+cluster+"-"+role)
				return ok && rest != "" && numbered(rest, "-")
			}},
	}
}

const (
	lower  = "abcdefghijklmnopqrstuvwxyz"
	upper  = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	digits = "0123456789"
)

// nameOf reports whether s is 1 to 63 characters of chars starting with a
// letter or digit.
func nameOf(s, chars string) bool {
	if s == "" || len(s) > 63 || !strings.ContainsAny(s[:1], lower+upper+digits) {
		return false
	}
	return strings.Trim(s, chars) == ""
}

// numbered reports whether s is prefix and then digits only (none is fine
// for an empty prefix: kind's first worker has no number).
func numbered(s, prefix string) bool {
	rest, ok := strings.CutPrefix(s, prefix)
	return ok && strings.Trim(rest, digits) == "" && (prefix == "" || rest != "")
}

// hexID reports whether s is an engine's container or image ID, as ps and
// inspect print them: 12 to 64 hex digits, "sha256:" before them for
// Docker's image IDs. Only such IDs are passed to the engine's CLI.
func hexID(s string) bool {
	s = strings.TrimPrefix(s, "sha256:")
	return len(s) >= 12 && len(s) <= 64 && strings.Trim(s, digits+"abcdef") == ""
}

// engineCLIs are the engines whose containers may be nodes, in the order
// they are looked at.
func engineCLIs() []string { return []string{"docker", "podman"} }

// container is the part of `docker inspect` and `podman inspect` the node
// checks read; both print these fields under these names.
type container struct {
	ID   string `json:"Id"`
	Name string `json:"Name"`
	// Image is the image's ID (Docker: "sha256:HEX", podman: HEX).
	Image string `json:"Image"`
	State struct {
		Running bool   `json:"Running"`
		Status  string `json:"Status"`
	} `json:"State"`
	Config struct {
		Labels map[string]string `json:"Labels"`
	} `json:"Config"`
	HostConfig struct {
		Privileged bool `json:"Privileged"`
		Devices    []struct {
			PathOnHost      string `json:"PathOnHost"`
			PathInContainer string `json:"PathInContainer"`
		} `json:"Devices"`
		// DeviceRequests are Docker's --gpus; podman prints none (its
		// --gpus is a CDI device, which shows in Devices).
		DeviceRequests []struct {
			Driver       string     `json:"Driver"`
			Capabilities [][]string `json:"Capabilities"`
		} `json:"DeviceRequests"`
	} `json:"HostConfig"`
	Mounts []struct {
		Source      string `json:"Source"`
		Destination string `json:"Destination"`
		RW          bool   `json:"RW"`
	} `json:"Mounts"`
}

// node is a container some tool runs as a Kubernetes node.
type node struct {
	c       container
	tool    tool
	cluster string
	engine  string
	// inside is which of insidePaths exist in the node; nil when it was
	// not looked into (stopped, or the exec failed: lookErr says why).
	inside  map[string]bool
	lookErr error
}

func (n node) name() string { return strings.TrimPrefix(n.c.Name, "/") }

// nodeFiles are the node paths looked for inside a running node: what the
// chart's node setup writes (the hook copy and our spec, at the chart's
// default hookDir and cdiDir) and what the GPU needs there (the lib dir's
// libdxcore and the drivers dir), which a --gpus hook mounts at start
// where inspect cannot see it.
type nodeFiles struct{ hook, spec, lib, drivers string }

func defaultNodeFiles() nodeFiles {
	return nodeFiles{
		hook:    nodesetup.Setup{HookDir: nodesetup.DefaultHookDir}.HookPath(),
		spec:    filepath.Join(nodesetup.DefaultCDIDir, cdispec.FileName(cdispec.Kind)),
		lib:     filepath.Join(wsl.LibDir, libCommon[0]),
		drivers: wsl.DriversDir,
	}
}

func (f nodeFiles) all() []string { return []string{f.hook, f.spec, f.lib, f.drivers} }

// lookScript prints which of its arguments exist, one a line, and exits 0
// whatever it finds: a failing exec is then the engine's failure, never a
// missing file. The paths are arguments, never part of the script.
const lookScript = `ls -1d -- "$@" 2>/dev/null; exit 0`

// RunNodes checks the Kubernetes nodes that run as containers of Docker or
// podman on this host (kind, minikube, k3d) for what the chart needs in
// them: /dev/dxg, /usr/lib/wsl, and the chart's own files.
//
// A container is a node only when its tool's labels were set on the
// container, not by its image (any image may carry any label: compared
// with the image's own labels), its cluster name is one the tool makes and
// its name is the one the tool gives that node. Any other container that
// carries a tool's cluster label is reported and neither checked nor
// looked into.
func RunNodes(opt Options) *Report {
	o := opt.withDefaults()
	r := &Report{}
	files := defaultNodeFiles()
	seen := map[string]bool{}
	var answered []string
	total := 0
	for _, cli := range engineCLIs() {
		nodes, ok := listNodes(o, r, cli)
		if !ok {
			continue
		}
		answered = append(answered, cli)
		for _, n := range nodes {
			if seen[n.c.ID] { // docker is podman's docker shim
				continue
			}
			seen[n.c.ID] = true
			total++
			if n.c.State.Running {
				// A proven node only (listNodes), and the command is
				// constant: the paths are arguments, the ID is hex.
				out, err := o.Engine(cli, append([]string{"exec", n.c.ID, "sh", "-c", lookScript, "sh"}, files.all()...)...)
				if err != nil {
					n.lookErr = err
				} else {
					n.inside = map[string]bool{}
					for _, l := range strings.Split(string(out), "\n") {
						n.inside[strings.TrimSpace(l)] = true
					}
				}
			}
			checkNode(o, r, n, files)
		}
	}
	if total == 0 && len(answered) > 0 {
		r.add("nodes", OK, "", "no kind, minikube or k3d node containers in %s, running or stopped: nothing to check", strings.Join(answered, " or "))
	}
	return r
}

// listNodes finds the node containers of one engine; false when the engine
// could not be asked, which it has said in r.
func listNodes(o Options, r *Report, cli string) ([]node, bool) {
	var ids []string
	for _, t := range tools() {
		out, err := o.Engine(cli, "ps", "-a", "--filter", "label="+t.cluster, "--format", "{{.ID}}")
		if err != nil {
			engineUnavailable(r, cli, err)
			return nil, false
		}
		for _, id := range strings.Fields(string(out)) {
			if hexID(id) && !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
	}
	if len(ids) == 0 {
		return nil, true
	}
	out, err := o.Engine(cli, append([]string{"inspect", "--type", "container"}, ids...)...)
	var cs []container
	if jerr := json.Unmarshal(out, &cs); jerr != nil {
		if err != nil {
			r.add(cli, Warn, "", "%s inspect: %v: its node containers are not checked", cli, err)
		} else {
			r.add(cli, Warn, fmt.Sprintf("run `%s inspect %s` and check it prints a JSON array", cli, ids[0]),
				"%s inspect printed what is not a JSON array of containers (%v): its node containers are not checked", cli, jerr)
		}
		return nil, false
	}
	// A container removed between ps and inspect makes inspect fail for
	// it and print the others: those are checked.
	images := imageLabels(o, cli, cs)
	var nodes []node
	for _, c := range cs {
		if !hexID(c.ID) {
			continue
		}
		n, why, ok := nodeOf(c, images)
		switch {
		case ok && n.tool.name == "":
			// A tool's container that is no node (a load balancer).
		case ok:
			n.engine = cli
			nodes = append(nodes, n)
		case why != "":
			r.add(cli+" "+c.ID[:12], Warn, "",
				"container %q carries %s: not taken for a node, not looked into", strings.TrimPrefix(c.Name, "/"), why)
		}
	}
	sort.SliceStable(nodes, func(i, j int) bool { return nodes[i].name() < nodes[j].name() })
	return nodes, true
}

// imageLabels returns the labels of the containers' images by image ID
// (without "sha256:"); an image inspect could not read is missing.
func imageLabels(o Options, cli string, cs []container) map[string]map[string]string {
	var ids []string
	for _, c := range cs {
		if hexID(c.Image) && !slices.Contains(ids, c.Image) {
			ids = append(ids, c.Image)
		}
	}
	labels := map[string]map[string]string{}
	if len(ids) == 0 {
		return labels
	}
	// As for containers: an image inspect cannot find fails it and the
	// others are printed.
	out, _ := o.Engine(cli, append([]string{"inspect", "--type", "image"}, ids...)...)
	var images []struct {
		ID     string `json:"Id"`
		Config struct {
			Labels map[string]string `json:"Labels"`
		} `json:"Config"`
	}
	if json.Unmarshal(out, &images) != nil {
		return labels
	}
	for _, im := range images {
		if im.Config.Labels == nil {
			im.Config.Labels = map[string]string{}
		}
		labels[strings.TrimPrefix(im.ID, "sha256:")] = im.Config.Labels
	}
	return labels
}

// nodeOf decides whether c is a node of one of the tools. ok with a zero
// tool is a tool's container that is not a node; not ok with why says
// what disqualifies a container that carries a tool's cluster label; not
// ok without why is a container of no tool.
func nodeOf(c container, images map[string]map[string]string) (n node, why string, ok bool) {
	name := strings.TrimPrefix(c.Name, "/")
	for _, t := range tools() {
		cluster, has := c.Config.Labels[t.cluster]
		if !has {
			continue
		}
		of := t.name + "'s label " + t.cluster
		image, read := images[strings.TrimPrefix(c.Image, "sha256:")]
		if !read {
			return node{}, of + ", and its image's labels could not be read to tell whether " + t.name + " set it", false
		}
		// A label the image carries, whatever its value: a container
		// could have been run with the same key set anew, but a tool's
		// node image carries none of its tool's labels.
		for _, key := range []string{t.cluster, t.role} {
			if _, fromImage := image[key]; key != "" && fromImage {
				return node{}, t.name + "'s label " + key + " from its image: an image's labels do not make a node", false
			}
		}
		role := ""
		if t.role != "" {
			role = c.Config.Labels[t.role]
			if role != "" && !slices.Contains(t.nodeRoles, role) && t.names(cluster) {
				return node{}, "", true // kind's and k3d's load balancers, k3d's registry
			}
			if !slices.Contains(t.nodeRoles, role) {
				return node{}, of + " with the role " + strconv.Quote(role) + ", which " + t.name + " gives no node", false
			}
		}
		if !t.names(cluster) {
			return node{}, of + " naming the cluster " + strconv.Quote(cluster) + ", a name " + t.name + " never makes", false
		}
		if !t.named(name, cluster, role) {
			return node{}, of + " naming the cluster " + strconv.Quote(cluster) + ", but " + t.name + " names that cluster's nodes otherwise", false
		}
		return node{c: c, tool: t, cluster: cluster}, "", true
	}
	return node{}, "", false
}

// engineUnavailable says why an engine was not asked: not installed or
// not running is no fault of a node; anything else is a warning.
func engineUnavailable(r *Report, cli string, err error) {
	msg := err.Error()
	switch {
	case errors.Is(err, exec.ErrNotFound):
		r.add(cli, OK, "", "%s is not on PATH: no node containers of it to check", cli)
	case strings.Contains(msg, "daemon running") || strings.Contains(msg, "Cannot connect to"):
		r.add(cli, OK, "", "%s's daemon is not running (%s): no node containers of it to check", cli, msg)
	case strings.Contains(msg, "permission denied"):
		r.add(cli, Warn, "sudo wsl-gpu-ctl doctor --k8s", "%s ps: %s: its node containers are not checked", cli, msg)
	default:
		r.add(cli, Warn, "", "%s ps: %s: its node containers are not checked", cli, msg)
	}
}

// checkNode says for one node whether it has /dev/dxg and /usr/lib/wsl,
// and whether the chart has set it up.
func checkNode(o Options, r *Report, n node, files nodeFiles) {
	name, t := n.name(), n.tool
	recreate := fmt.Sprintf(t.recreate, n.cluster)
	state := "running"
	if !n.c.State.Running {
		state = "stopped"
		if n.c.State.Status != "" {
			state = n.c.State.Status
		}
	}
	kind := t.name + " node"
	if role := n.c.Config.Labels[t.role]; t.role != "" && role != "" {
		kind += " (" + role + ")"
	}
	of := "cluster"
	if t.name == "minikube" {
		of = "profile"
	}
	who := fmt.Sprintf("%s of %s %q in %s, %s", kind, of, n.cluster, n.engine, state)

	// /dev/dxg.
	gpus := gpuRequest(n.c)
	dxgOK := true
	switch {
	case n.c.HostConfig.Privileged:
		r.add(name+" dxg", OK, "", "%s: privileged, so it has every host device, %s included", who, o.DxgDevice)
	case hasDevice(n.c, o.DxgDevice):
		r.add(name+" dxg", OK, "", "%s: %s is passed in as a device", who, o.DxgDevice)
	case gpus != "":
		r.add(name+" dxg", OK, "", "%s: started with %s, whose hook gives it %s", who, gpus, o.DxgDevice)
	default:
		dxgOK = false
		fix := hookGPUs + recreate
		why := "not privileged, no --device " + o.DxgDevice + ", no --gpus"
		if t.name == "kind" {
			fix = recreate
			why = "not privileged (kind's nodes are, unless something changed that), no --device " + o.DxgDevice
		}
		r.add(name+" dxg", Fail, fix, "%s: %s: the chart's pod cannot open the GPU there", who, why)
	}

	// /usr/lib/wsl.
	wslOK := true
	mounted, rw, src := wslMount(n.c)
	fixWSL := hookGPUs + recreate
	if t.name == "kind" {
		fixWSL = "in each node of the kind config: " + kindMount + ", then " + recreate + " (kind cannot add a mount to a running node)"
	}
	switch {
	case mounted && rw:
		fix := "recreate it with the mount read-only (:ro), or without it: " + hookGPUs + recreate
		if t.name == "kind" {
			fix = "readOnly: true in the kind config's extraMounts, then " + recreate
		}
		r.add(name+" /usr/lib/wsl", Warn, fix, "mounted read-write from %s: the chart never writes there, and read-write lets a pod's mistake reach Windows' driver files", src)
	case mounted:
		r.add(name+" /usr/lib/wsl", OK, "", "mounted read-only from %s", src)
	case n.inside != nil && n.inside[files.lib] && n.inside[files.drivers]:
		how := "no mount of it shows in inspect"
		if gpus != "" {
			how = "the hook of its " + gpus + " mounted it at start"
		}
		r.add(name+" /usr/lib/wsl", OK, "", "%s and %s are in the node (%s)", files.lib, files.drivers, how)
	case n.inside != nil:
		wslOK = false
		missing := files.lib
		if n.inside[files.lib] {
			missing = files.drivers
		}
		why := "no mount of /usr/lib/wsl"
		if gpus != "" {
			why = "started with " + gpus + ", yet no hook mounted it (is the hook wired? wsl-gpu-ctl doctor)"
		}
		r.add(name+" /usr/lib/wsl", Fail, fixWSL, "%s is not in the node: %s; the chart's pod waits for it and the node advertises no GPU", missing, why)
	case gpus != "":
		r.add(name+" /usr/lib/wsl", OK, "", "started with %s, whose hook mounts the lib dir and the driver folders at start (inspect does not show them)", gpus)
	default:
		wslOK = false
		r.add(name+" /usr/lib/wsl", Fail, fixWSL, "not mounted in the node: the chart's pod waits for it and the node advertises no GPU")
	}

	// The chart's files.
	switch {
	case !n.c.State.Running:
		r.add(name+" chart", OK, "", "the node is %s: not looked inside", state)
	case n.lookErr != nil:
		r.add(name+" chart", Warn, "", "could not look inside: %v", n.lookErr)
	case n.inside[files.hook] && n.inside[files.spec]:
		r.add(name+" chart", OK, "", "the chart has set it up: %s and %s are there", files.hook, files.spec)
	case !dxgOK || !wslOK:
		r.add(name+" chart", Warn, "", "no %s or %s: the chart's pod cannot set the node up before it has %s and /usr/lib/wsl (above)", files.hook, files.spec, o.DxgDevice)
	default:
		r.add(name+" chart", Warn, fmt.Sprintf(t.load, n.cluster)+", then helm install as docs/kubernetes.md \"Installing the chart\" says",
			"the chart is not installed on this node: no %s or %s (the chart's default hookDir and cdiDir)", files.hook, files.spec)
	}
}

// gpuRequest names the container's Docker --gpus request, "" for none.
func gpuRequest(c container) string {
	for _, d := range c.HostConfig.DeviceRequests {
		for _, caps := range d.Capabilities {
			if slices.Contains(caps, "gpu") {
				return "--gpus"
			}
		}
	}
	return ""
}

// hasDevice reports whether the host's device dev is passed in, or any
// device at the path the chart opens in a node.
func hasDevice(c container, dev string) bool {
	for _, d := range c.HostConfig.Devices {
		if d.PathOnHost == dev || d.PathInContainer == DefaultDxgDevice {
			return true
		}
	}
	return false
}

// wslMount finds /usr/lib/wsl among the container's mounts: itself, or
// both the lib dir and the drivers dir. rw is true if any of them is
// writable; src names the source(s).
func wslMount(c container) (mounted, rw bool, src string) {
	var lib, drivers bool
	var srcs []string
	for _, m := range c.Mounts {
		switch filepath.Clean(m.Destination) {
		case wsl.Dir:
			return true, m.RW, m.Source
		case wsl.LibDir:
			lib = true
		case wsl.DriversDir:
			drivers = true
		default:
			continue
		}
		rw = rw || m.RW
		srcs = append(srcs, m.Source)
	}
	if lib && drivers {
		return true, rw, strings.Join(srcs, " and ")
	}
	return false, false, ""
}
