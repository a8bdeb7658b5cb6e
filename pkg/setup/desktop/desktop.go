package desktop

import (
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/wsl"
)

// OperatingSystem is what `docker info` says of Docker Desktop's engine
// (its LinuxKit image's os-release), on Windows, macOS and Linux alike.
const OperatingSystem = "Docker Desktop"

// Name is the agent container's and the volume's name in the engine.
const Name = "wsl-gpu-hook"

// RoleLabel marks what install made, so a same-named container or volume
// someone else made is never taken over or removed.
const RoleLabel = "dev.wsl-gpu-hook.role"

// Roles, as RoleLabel's values.
const (
	RoleAgent  = "cdi-agent"
	RoleVolume = "hook"
)

// Engine is what install needs of `docker info`.
type Engine struct {
	OperatingSystem string
	ServerVersion   string
	// CDISpecDirs is empty when the engine has CDI off (or predates it).
	CDISpecDirs   []string
	DockerRootDir string
}

// ParseInfo reads the JSON of `docker info --format '{{json .}}'`. A CLI
// that cannot reach the engine prints its error instead of JSON: the
// caller reports that error, not this one.
func ParseInfo(data []byte) (Engine, error) {
	var e Engine
	if err := json.Unmarshal(data, &e); err != nil {
		return Engine{}, &Error{Msg: fmt.Sprintf("docker info printed no engine description (%v)", err),
			Fix: "check that `docker info` works in this shell"}
	}
	if e.ServerVersion == "" {
		return Engine{}, &Error{Msg: "docker info names no engine version: the docker CLI reached no engine",
			Fix: "start Docker Desktop and check that `docker info` works in this shell"}
	}
	return e, nil
}

// Error is a refusal: what is wrong and what to do, in one line.
type Error struct {
	Msg, Fix string
}

func (e *Error) Error() string { return e.Msg + ": " + e.Fix }

// IsDesktop says whether the engine is Docker Desktop's.
func (e Engine) IsDesktop() bool { return e.OperatingSystem == OperatingSystem }

// version is the engine's major and minor version; 0, 0 when unreadable.
func (e Engine) version() (major, minor int) {
	f := strings.SplitN(e.ServerVersion, ".", 3)
	if len(f) < 2 {
		return 0, 0
	}
	major, _ = strconv.Atoi(f[0])
	minor, _ = strconv.Atoi(strings.TrimFunc(f[1], func(r rune) bool { return r < '0' || r > '9' }))
	return major, minor
}

// Check refuses an engine install cannot serve: not Docker Desktop's, or
// with CDI off. It returns the spec directory to write: want when the
// engine reads it, else the engine's /var/run/cdi (a tmpfs the agent can
// always write; Docker Desktop's /etc may be read-only), else the first
// directory it reads.
func (e Engine) Check(want string) (string, error) {
	if !e.IsDesktop() {
		return "", &Error{
			Msg: fmt.Sprintf("the docker CLI talks to an engine on %q, not Docker Desktop", e.OperatingSystem),
			Fix: "for a dockerd in this distro run `sudo wsl-gpu-ctl install cdi` there (docs/docker.md); to reach Docker Desktop, check `docker context ls`"}
	}
	if len(e.CDISpecDirs) == 0 {
		major, minor := e.version()
		switch {
		case major < 25:
			return "", &Error{Msg: fmt.Sprintf("Docker Desktop's engine %s has no CDI (it came with engine 25)", e.ServerVersion),
				Fix: "update Docker Desktop to 4.42 or later (engine 28.2+, CDI on by default)"}
		case major < 28 || major == 28 && minor < 2:
			return "", &Error{Msg: fmt.Sprintf("Docker Desktop's engine %s has CDI off", e.ServerVersion),
				Fix: `add "features": {"cdi": true} in Settings > Docker Engine and Apply & restart, or update Docker Desktop to 4.42 or later`}
		default:
			return "", &Error{Msg: fmt.Sprintf("Docker Desktop's engine %s has CDI turned off", e.ServerVersion),
				Fix: `remove "cdi": false from "features" in Settings > Docker Engine, then Apply & restart`}
		}
	}
	if want != "" {
		if !slices.Contains(e.CDISpecDirs, want) {
			return "", &Error{Msg: fmt.Sprintf("Docker Desktop's engine reads CDI specs from %s, not %s", strings.Join(e.CDISpecDirs, ", "), want),
				Fix: "name one of those with --cdi-dir, or leave it out"}
		}
		return want, nil
	}
	for _, d := range e.CDISpecDirs {
		if d == "/var/run/cdi" || d == "/run/cdi" {
			return d, nil
		}
	}
	return e.CDISpecDirs[0], nil
}

// HookDir is where the volume Name lives in the engine: where the CDI
// specs' hooks are, on the data disk. The caller checks it against `docker
// volume inspect`.
func (e Engine) HookDir() string {
	root := e.DockerRootDir
	if root == "" {
		root = "/var/lib/docker"
	}
	return path.Join(root, "volumes", Name, "_data")
}

// Options are what the commands are made from.
type Options struct {
	// Image is the project's image, already in the engine.
	Image string
	// CDIDir is the engine's spec directory to write (from Check).
	CDIDir string
	// HookDir is the volume's mount point in the engine.
	HookDir string
}

// agentArgs are the `docker run` arguments the agent runs with, before
// the image: the least it needs. It reads /dev/dxg and the lib dir to
// enumerate the adapters (gpu), writes only the spec dir and the volume,
// runs as root only to write those root-owned directories, with no
// capability, no network and a read-only root. Removing needs no GPU, so
// an engine that lost its /dev/dxg can still be cleaned.
func (o Options) agentArgs(gpu bool) []string {
	args := []string{
		"--user", "0:0", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
		"--network", "none", "--read-only", "--tmpfs", "/run", "--tmpfs", "/tmp",
	}
	if gpu {
		args = append(args, "--device", wsl.Device, "-v", wsl.Dir+":"+wsl.Dir+":ro")
	}
	return append(args,
		"-v", o.CDIDir+":"+o.CDIDir,
		"-v", Name+":"+o.HookDir,
		"--entrypoint", "/usr/bin/"+wsl.CtlName,
	)
}

// keepArgs are `wsl-gpu-ctl cdi keep`'s arguments for the agent.
func (o Options) keepArgs(extra ...string) []string {
	return append([]string{o.Image, "cdi", "keep", "--hook-dir", o.HookDir, "--dir", o.CDIDir}, extra...)
}

// Install is the docker commands install runs, in order: the volume, the
// agent once in the foreground, then the agent for good. Replacing an
// older agent (an upgrade) is the caller's step before these.
func Install(o Options) [][]string {
	return [][]string{
		{"volume", "create", "--label", RoleLabel + "=" + RoleVolume, Name},
		slices.Concat([]string{"run", "--rm", "--label", RoleLabel + "=" + RoleAgent + "-once"}, o.agentArgs(true), o.keepArgs("--once")),
		slices.Concat([]string{"run", "-d", "--name", Name, "--restart", "always", "--label", RoleLabel + "=" + RoleAgent},
			o.agentArgs(true), o.keepArgs()),
	}
}

// Uninstall is the docker commands uninstall runs after the agent is
// gone: the image once to remove what the agent wrote, then the volume.
func Uninstall(o Options) [][]string {
	return [][]string{
		slices.Concat([]string{"run", "--rm", "--label", RoleLabel + "=" + RoleAgent + "-remove"}, o.agentArgs(false), o.keepArgs("--remove")),
		{"volume", "rm", Name},
	}
}

// Quote renders a docker command as a shell line a user can paste:
// arguments with anything but safe characters single-quoted.
func Quote(args []string) string {
	out := []string{"docker"}
	for _, a := range args {
		if a != "" && strings.IndexFunc(a, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=,@+", r))
		}) < 0 {
			out = append(out, a)
			continue
		}
		out = append(out, "'"+strings.ReplaceAll(a, "'", `'\''`)+"'")
	}
	return strings.Join(out, " ")
}
