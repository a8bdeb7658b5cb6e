package doctor

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/setup/install"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/wsl"
)

// Names and files the engines know the hook by: install's, which writes them.
const (
	runtimeName   = wsl.RuntimeName
	nvidiaHook    = wsl.NvidiaHookName
	nvidiaCDI     = install.NvidiaCDIHookName
	daemonJSON    = install.DaemonJSON
	containerdCfg = install.ContainerdConfig
	daemonPATH    = install.DaemonPATH
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
	st, err := install.DockerState(o.install())
	proc := findDaemon(o, "dockerd")
	if dockerd == "" && !st.Exists && err == nil && proc == nil {
		r.add("docker", OK, "", "not installed: nothing to check")
		return
	}
	v := version{}
	if dockerd != "" {
		v = parseVersion(o.Version(dockerd))
	}

	// daemon.json: the runtime entry and the CDI switch.
	var parse *install.ParseError
	switch {
	case errors.As(err, &parse):
		r.add("docker runtime", Fail, "fix the JSON in "+daemonJSON, "%s is not valid JSON: dockerd refuses to start with it", daemonJSON)
	case err != nil:
		r.add("docker runtime", Fail, "", "%v", err)
	case !st.Exists:
		r.add("docker runtime", Warn, "sudo wsl-gpu-hook install docker", "%s does not exist: no wsl-gpu runtime, so `docker run --runtime wsl-gpu` is unavailable", daemonJSON)
	case !st.HasRuntime:
		r.add("docker runtime", Warn, "sudo wsl-gpu-hook install docker", "%s has no %q runtime, so `docker run --runtime wsl-gpu` is unavailable", daemonJSON, runtimeName)
	case !isFile(o.resolved(st.RuntimePath)):
		r.add("docker runtime", Fail, "sudo wsl-gpu-hook install docker", "runtime %q in %s is %s, which does not exist: containers started with it fail", runtimeName, daemonJSON, st.RuntimePath)
	default:
		r.add("docker runtime", OK, "", "runtime %q is %s", runtimeName, st.RuntimePath)
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
	on, set := st.CDI, st.CDISet
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
	case st.Exists && changedAfter(o, daemonJSON, proc.start):
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

	// The admin's file masks the package's.
	st, err := install.PodmanState(o.install())
	var parse *install.ParseError
	switch {
	case errors.As(err, &parse):
		r.add("podman hooks.d", Fail, "sudo wsl-gpu-hook install podman", "%s is not a hooks.d file (oci-hooks(5)): podman refuses to run any container", st.File)
	case err != nil:
		r.add("podman hooks.d", Fail, "", "%v", err)
	case st.File == "":
		r.add("podman hooks.d", Warn, "sudo wsl-gpu-hook install podman", "no %s in %s or %s: `podman run --annotation wsl-gpu-hook/devices=all` gets no GPU", filepath.Base(install.HooksDPackage), filepath.Dir(install.HooksDPackage), filepath.Dir(install.HooksDAdmin))
	case !isFile(o.resolved(st.HookPath)):
		r.add("podman hooks.d", Fail, "sudo wsl-gpu-hook install podman", "%s runs %s, which does not exist: annotated containers fail to start", st.File, st.HookPath)
	default:
		r.add("podman hooks.d", OK, "", "%s runs %s for containers with the wsl-gpu-hook/devices annotation", st.File, st.HookPath)
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

func checkContainerd(o Options, r *Report) {
	bin := lookPath(o, daemonPATH, "containerd")
	v := version{}
	if bin != "" {
		v = parseVersion(o.Version(bin))
	}
	st, err := install.ContainerdState(o.install(), v.atLeast(2, 0))
	if bin == "" && !st.Exists && err == nil {
		r.add("containerd", OK, "", "not installed: nothing to check")
		return
	}
	var parse *install.ParseError
	switch {
	case errors.As(err, &parse):
		r.add("containerd", Fail, "fix the TOML in "+containerdCfg, "%s does not parse, so containerd refuses to start: %v", containerdCfg, parse.Err)
		return
	case err != nil:
		r.add("containerd", Fail, "", "%v", err)
		return
	}
	plugin, handlerIn, binary := st.Plugin, st.HandlerIn, st.Binary
	r.add("containerd", OK, "", "%s, version %s, %s config version %d", orDash(bin), v.or("unknown"), containerdCfg, st.Version)

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
	case st.CDISet:
		r.add("containerd cdi", OK, "", "CDI is %s (enable_cdi = %t)", map[bool]string{true: "on", false: "off"}[st.CDI], st.CDI)
	case v.atLeast(2, 0):
		r.add("containerd cdi", OK, "", "CDI is on (the default of containerd 2)")
	default:
		r.add("containerd cdi", OK, "", "CDI is off: set enable_cdi = true under plugins.%q to use CDI names from the kubelet", plugin)
	}
	if proc := findDaemon(o, "containerd"); proc != nil && !proc.start.IsZero() && st.Exists && changedAfter(o, containerdCfg, proc.start) {
		r.add("containerd restart", Warn, "sudo systemctl restart containerd", "%s changed after containerd started (%s): containerd has not read it", containerdCfg, proc.start.Format(time.RFC3339))
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
