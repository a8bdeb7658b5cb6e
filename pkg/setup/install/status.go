package install

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/pelletier/go-toml/v2"
)

// Where the engines keep what install edits, as system paths. They are
// exported so that whoever judges an installation (doctor) reads the same
// files install writes.
const (
	DaemonJSON       = daemonJSON
	ContainerdConfig = containerdCfg
	// HooksDPackage is podman's package hooks.d file, HooksDAdmin the
	// administrator's file of the same name, which masks it.
	HooksDPackage = hooksDFile
	HooksDAdmin   = hooksDAdmin
	// ContainerdDropIns is what containerd 2.2+ imports when config.toml
	// does not exist.
	ContainerdDropIns = "/etc/containerd/conf.d/*.toml"
	// DaemonPATH is the PATH systemd gives services that set none.
	DaemonPATH = daemonPATH
	// NvidiaCDIHookName is the executable whose presence on dockerd's
	// PATH makes Docker 29.2+ turn --gpus into CDI nvidia.com/gpu first.
	NvidiaCDIHookName = "nvidia-cdi-hook"
)

// ParseError is a configuration file an engine would refuse to read: the
// engine does not start (dockerd, containerd) or runs no container
// (podman) until it is fixed.
type ParseError struct {
	Path string // system path
	Err  error
}

func (e *ParseError) Error() string { return fmt.Sprintf("%s does not parse: %v", e.Path, e.Err) }
func (e *ParseError) Unwrap() error { return e.Err }

// DockerStatus is what daemon.json says of the GPU wiring.
type DockerStatus struct {
	// Exists says daemon.json exists; the fields below are zero if not.
	Exists bool
	// HasRuntime says the "wsl-gpu" runtime is defined; RuntimePath is its
	// path (a system path).
	HasRuntime  bool
	RuntimePath string
	// CDISet says features.cdi is set; CDI is its value.
	CDISet, CDI bool
}

// DockerState reads daemon.json. A file that is not JSON is a *ParseError.
func DockerState(o Options) (DockerStatus, error) {
	data, err := readOptional(o, daemonJSON)
	if err != nil || data == nil {
		return DockerStatus{}, err
	}
	var cfg struct {
		Runtimes map[string]struct {
			Path string `json:"path"`
		} `json:"runtimes"`
		Features map[string]bool `json:"features"`
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		return DockerStatus{}, &ParseError{Path: daemonJSON, Err: err}
	}
	rt, ok := cfg.Runtimes[runtimeName]
	cdi, set := cfg.Features["cdi"]
	return DockerStatus{Exists: true, HasRuntime: ok, RuntimePath: rt.Path, CDISet: set, CDI: cdi}, nil
}

// PodmanStatus is the hooks.d file podman runs for the request annotation.
type PodmanStatus struct {
	// File is the hooks.d file in effect (the administrator's masks the
	// package's), "" when there is none.
	File string
	// HookPath is the executable it runs.
	HookPath string
}

// PodmanState finds the hooks.d file in effect and reads its hook path. A
// file that is not a hooks.d file (oci-hooks(5)) is a *ParseError.
func PodmanState(o Options) (PodmanStatus, error) {
	for _, file := range []string{hooksDAdmin, hooksDFile} {
		data, err := readOptional(o, file)
		if err != nil {
			return PodmanStatus{File: file}, err
		}
		if data == nil {
			continue
		}
		var h struct {
			Hook struct {
				Path string `json:"path"`
			} `json:"hook"`
		}
		if err := json.Unmarshal(data, &h); err != nil {
			return PodmanStatus{File: file}, &ParseError{Path: file, Err: err}
		}
		if h.Hook.Path == "" {
			return PodmanStatus{File: file}, &ParseError{Path: file, Err: errors.New("no hook.path")}
		}
		return PodmanStatus{File: file, HookPath: h.Hook.Path}, nil
	}
	return PodmanStatus{}, nil
}

// ContainerdStatus is what containerd's configuration says of the handler.
type ContainerdStatus struct {
	// Exists says config.toml exists.
	Exists bool
	// Version is the configuration's version: its version key, else 1, or
	// 3 for a containerd 2 (which migrates an unversioned file as version
	// 1 but writes 3).
	Version int64
	// Plugin is the CRI plugin that holds runtime handlers at Version.
	Plugin string
	// HandlerIn is the file (system path) that defines the wsl-gpu
	// handler, "" when none does; Binary is the handler's BinaryName.
	HandlerIn, Binary string
	// CDISet says enable_cdi is set in some file; CDI is its value.
	CDISet, CDI bool
}

// ContainerdState reads config.toml and the files it imports (the conf.d
// drop-ins when there is no config.toml), as containerd 1.x (v2 false) or
// 2.x (v2 true) would. A main file that does not parse is a *ParseError;
// an import that does not parse is skipped, as it defines nothing here.
func ContainerdState(o Options, v2 bool) (ContainerdStatus, error) {
	data, err := readOptional(o, containerdCfg)
	if err != nil {
		return ContainerdStatus{}, err
	}
	cfg := map[string]any{}
	if data != nil {
		if err := toml.Unmarshal(data, &cfg); err != nil {
			return ContainerdStatus{Exists: true}, &ParseError{Path: containerdCfg, Err: err}
		}
	}
	s := ContainerdStatus{Exists: data != nil}
	s.Version, _ = cfg["version"].(int64)
	if s.Version == 0 {
		s.Version = 1
		if v2 {
			s.Version = 3
		}
	}
	s.Plugin = criPlugin[s.Version]

	files := []string{containerdCfg}
	tables := map[string]map[string]any{containerdCfg: cfg}
	imports, _ := cfg["imports"].([]any)
	if data == nil {
		imports = append(imports, ContainerdDropIns)
	}
	for _, imp := range imports {
		pattern, _ := imp.(string)
		matches, _ := filepath.Glob(o.path(pattern))
		for _, m := range matches {
			var c map[string]any
			if d, err := os.ReadFile(m); err == nil && toml.Unmarshal(d, &c) == nil {
				name := o.unprefixed(m)
				files = append(files, name)
				tables[name] = c
			}
		}
	}
	for _, name := range files {
		p := lookup(tables[name], "plugins", s.Plugin)
		if rt := lookup(p, "containerd", "runtimes", runtimeName); rt != nil {
			s.HandlerIn = name
			s.Binary, _ = lookup(rt, "options")["BinaryName"].(string)
		}
		if b, ok := p["enable_cdi"].(bool); ok {
			s.CDISet, s.CDI = true, b
		}
	}
	return s, nil
}

// unprefixed is the system path of a path under Prefix.
func (o Options) unprefixed(p string) string {
	if rel, err := filepath.Rel(o.Prefix, p); o.Prefix != "" && err == nil && !strings.HasPrefix(rel, "..") {
		return "/" + rel
	}
	return p
}
