// Package oci reads what a runtime hands an OCI hook: the container state on
// stdin and the parts of the bundle's config.json the hook needs.
//
// It decodes only the fields it uses, so a config.json with fields from a
// newer runtime-spec never breaks the hook, and it resolves root.path
// relative to the bundle as the runtime does.
//
// Both documents are decoded as json.Unmarshal into the runtime-spec types
// would, results and errors alike, but without its reflection when the
// document allows (decode.go): a hook decodes once per process, and
// json.Unmarshal's first call costs ~1 ms of every container start.
package oci

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/smallfile"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// Size limits. The runtime copies config.json's annotations into the state
// it writes to a hook's stdin, so a state is as large as the annotations an
// engine allows, and the two limits must move together. No engine bounds
// annotations below these: Kubernetes caps a pod's at 256 KiB, containerd's
// API caps a whole spec at 16 MiB (its gRPC message size), and Docker and
// podman set no cap at all. The limits only keep a runaway writer from
// growing a root process without end.
const (
	// MaxSpecSize bounds config.json.
	MaxSpecSize = 64 << 20
	// MaxStateSize bounds the state on stdin: the spec's annotations plus
	// room for the state's own few fields.
	MaxStateSize = MaxSpecSize + 1<<20
)

// TooLargeError is a state or config.json over its limit.
type TooLargeError struct {
	What  string // "container state on stdin", or the config.json path
	Size  int64  // bytes seen
	Limit int64
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("%s is %d bytes, more than the hook's limit of %d MiB: the container's annotations are too large; remove the large ones", e.What, e.Size, e.Limit>>20)
}

// State is the OCI state a runtime writes to a hook's stdin, with the
// root filesystem crun adds to it.
type State struct {
	specs.State
	// Root is crun's "root": root.path as config.json has it (absolute or
	// relative to the bundle). runc sends none.
	Root string `json:"root,omitempty"`
}

// ReadState decodes and checks the OCI state a runtime writes to a hook's stdin.
func ReadState(r io.Reader) (*State, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxStateSize+1))
	if err != nil {
		return nil, fmt.Errorf("read container state from stdin: %w", err)
	}
	if len(data) > MaxStateSize {
		// Count the rest without keeping it, so the line says what was sent.
		rest, _ := io.Copy(io.Discard, r)
		return nil, &TooLargeError{What: "container state on stdin", Size: int64(len(data)) + rest, Limit: MaxStateSize}
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, errors.New("no container state on stdin: run this as an OCI hook (runc passes the state on stdin)")
	}
	st, err := decodeState(data)
	if err != nil {
		return nil, fmt.Errorf("decode container state from stdin: %w", err)
	}
	if st.Bundle == "" || !filepath.IsAbs(st.Bundle) {
		return nil, fmt.Errorf("container state: bundle %q is not an absolute path", st.Bundle)
	}
	if st.Pid < 0 {
		return nil, fmt.Errorf("container state: invalid pid %d", st.Pid)
	}
	return &st, nil
}

// Spec is the subset of config.json the hook reads.
type Spec struct {
	Root        *specs.Root       `json:"root"`
	Process     *Process          `json:"process"`
	Annotations map[string]string `json:"annotations"`
	Linux       *Linux            `json:"linux"`
	Mounts      []specs.Mount     `json:"mounts"`
}

// Process is the subset of the container process the hook reads.
type Process struct {
	Env []string `json:"env"`
}

// Linux is the subset of the Linux section the hook reads.
type Linux struct {
	Resources  *Resources             `json:"resources"`
	Devices    []specs.LinuxDevice    `json:"devices"`
	Namespaces []specs.LinuxNamespace `json:"namespaces"`
}

// Resources is the subset of linux.resources the hook reads.
type Resources struct {
	Devices []specs.LinuxDeviceCgroup `json:"devices"`
}

// LoadSpec reads <bundle>/config.json.
func LoadSpec(bundle string) (*Spec, error) {
	path := filepath.Join(bundle, "config.json")
	data, err := smallfile.Read(path, MaxSpecSize)
	if errors.Is(err, smallfile.ErrTooLarge) {
		size := int64(MaxSpecSize + 1)
		if fi, err := os.Stat(path); err == nil {
			size = fi.Size()
		}
		return nil, &TooLargeError{What: path, Size: size, Limit: MaxSpecSize}
	}
	if err != nil {
		return nil, fmt.Errorf("bundle config: %w", err)
	}
	s, err := decodeSpec(data)
	if err != nil {
		return nil, fmt.Errorf("decode %s: %w", path, err)
	}
	return s, nil
}

// RootPath returns the container's root filesystem as a host path:
// root.path is absolute or relative to the bundle.
func (s *Spec) RootPath(bundle string) (string, error) {
	if s.Root == nil || s.Root.Path == "" {
		return "", errors.New("bundle config has no root.path")
	}
	p := s.Root.Path
	if !filepath.IsAbs(p) {
		p = filepath.Join(bundle, p)
	}
	return filepath.Clean(p), nil
}

// RootPath is the root filesystem crun names in the state, as a host
// path (root.path as config.json has it: absolute or relative to the
// bundle), and whether it names one; runc names none.
func (s *State) RootPath() (string, bool) {
	if s.Root == "" {
		return "", false
	}
	p := s.Root
	if !filepath.IsAbs(p) {
		p = filepath.Join(s.Bundle, p)
	}
	return filepath.Clean(p), true
}

// Env returns the value of the container environment variable name and
// whether it is set.
func (s *Spec) Env(name string) (string, bool) {
	if s.Process == nil {
		return "", false
	}
	val, found := "", false
	// The last assignment wins, as in execve's environment handling by libc.
	for _, kv := range s.Process.Env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == name {
			val, found = v, true
		}
	}
	return val, found
}

// DeviceRules returns linux.resources.devices: the rules the runtime applied.
func (s *Spec) DeviceRules() []specs.LinuxDeviceCgroup {
	if s.Linux == nil || s.Linux.Resources == nil {
		return nil
	}
	return s.Linux.Resources.Devices
}

// HasDevice reports whether linux.devices lists a device at path: the
// runtime then makes that node itself.
func (s *Spec) HasDevice(path string) bool {
	if s.Linux == nil {
		return false
	}
	for _, d := range s.Linux.Devices {
		if d.Path == path {
			return true
		}
	}
	return false
}

// UserNamespace reports whether the container gets its own user namespace,
// whose /dev cannot hold a usable device node: the host's must be bound.
func (s *Spec) UserNamespace() bool {
	if s.Linux == nil {
		return false
	}
	for _, ns := range s.Linux.Namespaces {
		if ns.Type == specs.UserNamespace {
			return true
		}
	}
	return false
}

// HasMount reports whether the spec mounts something at destination: an
// engine that injected a CDI device mounted its folders so.
func (s *Spec) HasMount(destination string) bool {
	for _, m := range s.Mounts {
		if filepath.Clean(m.Destination) == destination {
			return true
		}
	}
	return false
}
