package doctor

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2"
)

// Names the hook is known by to engines.
const (
	runtimeName = "wsl-gpu"                       // Docker runtime and containerd handler
	nvidiaHook  = "nvidia-container-runtime-hook" // what Docker's --gpus runs
	nvidiaCDI   = "nvidia-cdi-hook"               // makes Docker 29.2+ try CDI first
	hooksDFile  = "wsl-gpu-hook.json"
)

var (
	daemonJSON    = "/etc/docker/daemon.json"
	containerdCfg = "/etc/containerd/config.toml"
	hooksDirs     = []string{"/usr/share/containers/oci/hooks.d", "/etc/containers/oci/hooks.d"}
)

// version is an engine's major.minor; zero when unknown.
type version struct{ major, minor int }

var versionRE = regexp.MustCompile(`(\d+)\.(\d+)`)

// parseVersion takes the first x.y in a `--version` line ("Docker version
// 20.10.24+dfsg1, build ...", "podman version 4.3.1", "containerd
// containerd.io 1.7.24 ...").
func parseVersion(line string) version {
	// containerd prints its module path first; skip to the first token
	// that starts with a digit or a 'v' and a digit.
	for _, f := range strings.Fields(line) {
		f = strings.TrimPrefix(f, "v")
		if m := versionRE.FindStringSubmatch(f); m != nil && strings.HasPrefix(f, m[0]) {
			a, _ := strconv.Atoi(m[1])
			b, _ := strconv.Atoi(m[2])
			return version{a, b}
		}
	}
	return version{}
}

func (v version) known() bool           { return v != version{} }
func (v version) atLeast(a, b int) bool { return v.major > a || v.major == a && v.minor >= b }
func (v version) String() string        { return fmt.Sprintf("%d.%d", v.major, v.minor) }
func (v version) or(unknown string) string {
	return map[bool]string{true: v.String(), false: unknown}[v.known()]
}

func checkDocker(o Options, r *Report, cdi cdiFacts) {
	dockerd := lookPath(o, daemonPATH, "dockerd")
	data, rerr := os.ReadFile(o.resolved(daemonJSON))
	proc := findDaemon(o, "dockerd")
	if dockerd == "" && errors.Is(rerr, fs.ErrNotExist) && proc == nil {
		r.add("docker", OK, "", "not installed: nothing to check")
		return
	}
	v := version{}
	if dockerd != "" {
		v = parseVersion(o.Version(dockerd))
	}

	// daemon.json: the runtime entry and the CDI switch.
	var cfg struct {
		Runtimes map[string]struct {
			Path string `json:"path"`
		} `json:"runtimes"`
		Features map[string]bool `json:"features"`
	}
	switch {
	case errors.Is(rerr, fs.ErrNotExist):
		r.add("docker runtime", Warn, "sudo wsl-gpu-hook install docker", "%s does not exist: no wsl-gpu runtime, so `docker run --runtime wsl-gpu` is unavailable", daemonJSON)
	case rerr != nil:
		r.add("docker runtime", Fail, "", "read %s: %v", daemonJSON, rerr)
	case json.Unmarshal(data, &cfg) != nil:
		r.add("docker runtime", Fail, "fix the JSON in "+daemonJSON, "%s is not valid JSON: dockerd refuses to start with it", daemonJSON)
	default:
		rt, ok := cfg.Runtimes[runtimeName]
		switch {
		case !ok:
			r.add("docker runtime", Warn, "sudo wsl-gpu-hook install docker", "%s has no %q runtime, so `docker run --runtime wsl-gpu` is unavailable", daemonJSON, runtimeName)
		case !isFile(o.resolved(rt.Path)):
			r.add("docker runtime", Fail, "sudo wsl-gpu-hook install docker", "runtime %q in %s is %s, which does not exist: containers started with it fail", runtimeName, daemonJSON, rt.Path)
		default:
			r.add("docker runtime", OK, "", "runtime %q is %s", runtimeName, rt.Path)
		}
	}

	// --gpus: what dockerd finds on its PATH.
	path, where := daemonPATH, "systemd's default PATH (dockerd is not running)"
	if proc != nil {
		if p, ok := proc.env["PATH"]; ok {
			path, where = p, fmt.Sprintf("dockerd's PATH (pid %d)", proc.pid)
		} else {
			where = fmt.Sprintf("systemd's default PATH (dockerd, pid %d, has none set)", proc.pid)
		}
	}
	hook := lookPath(o, path, nvidiaHook)
	switch {
	case hook == "":
		r.add("docker --gpus", Warn, "sudo wsl-gpu-hook install docker && sudo systemctl restart docker",
			"no %s on %s: `docker run --gpus` fails with \"could not select device driver\"", nvidiaHook, where)
	case !isOurBinary(o, hook):
		r.add("docker --gpus", Warn, "use `docker run --runtime wsl-gpu` or CDI (sudo wsl-gpu-hook install cdi) instead of --gpus, or remove NVIDIA's container toolkit",
			"%s on %s is not wsl-gpu-hook (NVIDIA's container toolkit): --gpus runs NVIDIA's hook, which gives NVIDIA GPUs only", hook, where)
	case proc != nil && !proc.start.IsZero() && changedAfter(o, hook, proc.start):
		r.add("docker --gpus", Warn, "sudo systemctl restart docker", "%s appeared after dockerd started (%s): dockerd looks for it only at start", hook, proc.start.Format(time.RFC3339))
	default:
		r.add("docker --gpus", OK, "", "%s on %s is wsl-gpu-hook", hook, where)
	}
	if cdiHook := lookPath(o, path, nvidiaCDI); cdiHook != "" && (!v.known() || v.atLeast(29, 2)) {
		if cdi.hasKind("nvidia.com/gpu") {
			r.add("docker cdi-first", OK, "", "%s is on %s: Docker %s asks CDI for nvidia.com/gpu first, and a usable spec defines it", cdiHook, where, v.or("29.2+"))
		} else {
			r.add("docker cdi-first", Warn, "sudo wsl-gpu-hook install cdi", "%s is on %s: Docker %s turns --gpus into CDI nvidia.com/gpu first, and no usable spec defines it (it falls back to the hook after the CDI attempt fails)", cdiHook, where, v.or("29.2+"))
		}
	}

	// CDI on or off.
	on, set := cfg.Features["cdi"]
	switch {
	case v.known() && !v.atLeast(25, 0):
		r.add("docker cdi", OK, "", "Docker %s has no CDI support (25+ has): GPUs come through --gpus or --runtime wsl-gpu", v)
	case set && !on:
		r.add("docker cdi", OK, "", "CDI is off (features.cdi = false in %s): `--device nvidia.com/gpu=all` is refused", daemonJSON)
	case set || v.atLeast(28, 2):
		r.add("docker cdi", OK, "", "CDI is on: `docker run --device wsl-gpu-hook.dev/gpu=all` works with a spec in the CDI dirs")
	case v.known():
		r.add("docker cdi", OK, "", "CDI is off by default in Docker %s: set \"features\": {\"cdi\": true} in %s to use --device with CDI names", v, daemonJSON)
	default:
		r.add("docker cdi", OK, "", "CDI is on by default from Docker 28.2 (features.cdi in %s is unset; dockerd's version unknown)", daemonJSON)
	}

	// Restart since the configuration changed.
	switch {
	case proc == nil:
		r.add("docker restart", OK, "", "dockerd is not running: it reads its configuration when it starts")
	case proc.start.IsZero():
		r.add("docker restart", OK, "", "dockerd (pid %d): start time unknown", proc.pid)
	case rerr == nil && changedAfter(o, daemonJSON, proc.start):
		r.add("docker restart", Warn, "sudo systemctl restart docker", "%s changed after dockerd started (%s): dockerd has not read it", daemonJSON, proc.start.Format(time.RFC3339))
	default:
		r.add("docker restart", OK, "", "dockerd (pid %d) started %s, after its configuration last changed", proc.pid, proc.start.Format(time.RFC3339))
	}
}

// changedAfter reports whether the file at system path p (under Root;
// the link itself for a symlink) changed after t.
func changedAfter(o Options, p string, t time.Time) bool {
	fi, err := os.Lstat(o.path(p))
	return err == nil && fi.ModTime().After(t)
}

func checkPodman(o Options, r *Report, cdi cdiFacts) {
	podman := lookPath(o, daemonPATH, "podman")
	if podman == "" {
		r.add("podman", OK, "", "not installed: nothing to check")
		return
	}
	v := parseVersion(o.Version(podman))
	r.add("podman", OK, "", "%s, version %s", podman, v.or("unknown"))

	// The admin dir masks the package dir, file by file.
	found := ""
	for _, d := range hooksDirs {
		if p := filepath.Join(d, hooksDFile); isFile(o.resolved(p)) {
			found = p
		}
	}
	if found == "" {
		r.add("podman hooks.d", Warn, "sudo wsl-gpu-hook install podman", "no %s in %s: `podman run --annotation wsl-gpu-hook/devices=all` gets no GPU", hooksDFile, strings.Join(hooksDirs, " or "))
	} else {
		var h struct {
			Hook struct {
				Path string `json:"path"`
			} `json:"hook"`
		}
		data, err := os.ReadFile(o.resolved(found))
		switch {
		case err != nil:
			r.add("podman hooks.d", Fail, "", "read %s: %v", found, err)
		case json.Unmarshal(data, &h) != nil || h.Hook.Path == "":
			r.add("podman hooks.d", Fail, "sudo wsl-gpu-hook install podman", "%s is not a hooks.d file (oci-hooks(5)): podman refuses to run any container", found)
		case !isFile(o.resolved(h.Hook.Path)):
			r.add("podman hooks.d", Fail, "sudo wsl-gpu-hook install podman", "%s runs %s, which does not exist: annotated containers fail to start", found, h.Hook.Path)
		default:
			r.add("podman hooks.d", OK, "", "%s runs %s for containers with the wsl-gpu-hook/devices annotation", found, h.Hook.Path)
		}
	}

	switch {
	case v.known() && !v.atLeast(4, 1):
		r.add("podman cdi", OK, "", "podman %s has no CDI support (4.1+ has)", v)
	case v.atLeast(5, 0) && !cdi.hasKind("nvidia.com/gpu"):
		r.add("podman cdi", Warn, "sudo wsl-gpu-hook install cdi", "podman %s turns --gpus into CDI nvidia.com/gpu and no usable spec in %s defines it: `podman run --gpus all` fails with \"unresolvable CDI devices\"", v, strings.Join(o.CDIDirs, ", "))
	default:
		r.add("podman cdi", OK, "", "podman reads CDI specs from %s (see the cdi lines)", strings.Join(o.CDIDirs, ", "))
	}
}

// criPlugin is the CRI plugin that holds runtime handlers, by config version.
var criPlugin = map[int64]string{1: "cri", 2: "io.containerd.grpc.v1.cri", 3: "io.containerd.cri.v1.runtime"}

func checkContainerd(o Options, r *Report) {
	bin := lookPath(o, daemonPATH, "containerd")
	data, rerr := os.ReadFile(o.resolved(containerdCfg))
	if bin == "" && errors.Is(rerr, fs.ErrNotExist) {
		r.add("containerd", OK, "", "not installed: nothing to check")
		return
	}
	v := version{}
	if bin != "" {
		v = parseVersion(o.Version(bin))
	}
	cfg := map[string]any{}
	switch {
	case errors.Is(rerr, fs.ErrNotExist):
		// containerd runs on built-in defaults; 2.2+ imports conf.d.
	case rerr != nil:
		r.add("containerd", Fail, "", "read %s: %v", containerdCfg, rerr)
		return
	default:
		if err := toml.Unmarshal(data, &cfg); err != nil {
			r.add("containerd", Fail, "fix the TOML in "+containerdCfg, "%s does not parse, so containerd refuses to start: %v", containerdCfg, err)
			return
		}
	}
	cv, _ := cfg["version"].(int64)
	if cv == 0 {
		cv = 1
		if v.atLeast(2, 0) {
			cv = 3 // containerd 2 migrates an unversioned file as version 1, but writes 3
		}
	}
	plugin := criPlugin[cv]
	r.add("containerd", OK, "", "%s, version %s, %s config version %d", orDash(bin), v.or("unknown"), containerdCfg, cv)

	// The handler may sit in the main file or in a drop-in it imports.
	files := map[string]map[string]any{containerdCfg: cfg}
	imports, _ := cfg["imports"].([]any)
	if errors.Is(rerr, fs.ErrNotExist) {
		imports = append(imports, "/etc/containerd/conf.d/*.toml")
	}
	for _, imp := range imports {
		s, _ := imp.(string)
		matches, _ := filepath.Glob(o.resolved(s))
		for _, m := range matches {
			var c map[string]any
			if d, err := os.ReadFile(m); err == nil && toml.Unmarshal(d, &c) == nil {
				files[o.unroot(m)] = c
			}
		}
	}
	handlerIn, binary := "", ""
	cdiOn, cdiSet := false, false
	for name, c := range files {
		p := lookup(c, "plugins", plugin)
		if rt := lookup(p, "containerd", "runtimes", runtimeName); rt != nil {
			handlerIn = name
			binary, _ = lookup(rt, "options")["BinaryName"].(string)
		}
		if b, ok := p["enable_cdi"].(bool); ok {
			cdiOn, cdiSet = b, true
		}
	}
	switch {
	case handlerIn == "":
		r.add("containerd handler", Warn, "sudo wsl-gpu-hook install containerd && sudo systemctl restart containerd", "no %q runtime handler under plugins.%q: Kubernetes pods with runtimeClassName wsl-gpu cannot start", runtimeName, plugin)
	case binary == "" || !isFile(o.resolved(binary)):
		r.add("containerd handler", Fail, "sudo wsl-gpu-hook install containerd && sudo systemctl restart containerd", "handler %q in %s runs %q, which does not exist", runtimeName, handlerIn, binary)
	default:
		r.add("containerd handler", OK, "", "handler %q in %s runs %s", runtimeName, handlerIn, binary)
	}
	switch {
	case v.known() && !v.atLeast(1, 7):
		r.add("containerd cdi", OK, "", "containerd %s has no CDI in CRI (1.7+ has)", v)
	case cdiSet:
		r.add("containerd cdi", OK, "", "CDI is %s (enable_cdi = %t)", map[bool]string{true: "on", false: "off"}[cdiOn], cdiOn)
	case v.atLeast(2, 0):
		r.add("containerd cdi", OK, "", "CDI is on (the default of containerd 2)")
	default:
		r.add("containerd cdi", OK, "", "CDI is off: set enable_cdi = true under plugins.%q to use CDI names from the kubelet", plugin)
	}
	if proc := findDaemon(o, "containerd"); proc != nil && !proc.start.IsZero() && rerr == nil && changedAfter(o, containerdCfg, proc.start) {
		r.add("containerd restart", Warn, "sudo systemctl restart containerd", "%s changed after containerd started (%s): containerd has not read it", containerdCfg, proc.start.Format(time.RFC3339))
	}
}

// lookup walks nested TOML tables; nil when a key is missing.
func lookup(m map[string]any, keys ...string) map[string]any {
	for _, k := range keys {
		next, ok := m[k].(map[string]any)
		if !ok {
			return nil
		}
		m = next
	}
	return m
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
