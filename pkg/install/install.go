// Package install wires wsl-gpu-hook into container engines and takes it
// out again, without breaking the operator's configuration.
//
// What it owns, and nothing else: in Docker's daemon.json the runtime
// "wsl-gpu" (inserted and removed byte-exactly, so every other byte of the
// file stays as it was); the links nvidia-container-runtime-hook and
// wsl-gpu-runtime next to the binary; podman's hooks.d file
// wsl-gpu-hook.json; in containerd's config.toml a block between
// "# BEGIN wsl-gpu-hook" and "# END wsl-gpu-hook" lines (appended, so
// comments and keys elsewhere are untouched); for CDI the spec file and the
// systemd unit that refreshes it.
//
// Every change is computed first and written only if all of it can be: a
// malformed file is refused and left alone. Writes are atomic (temporary
// file and rename, the original mode kept) and the previous content is kept
// as <file>.wsl-gpu-hook.bak. Installing twice changes nothing the second
// time; uninstall after install restores the original bytes.
package install

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Options says where things are.
type Options struct {
	// Prefix is prepended to every system path; tests use a temp dir.
	Prefix string
	// BinDir holds wsl-gpu-hook and receives its other names.
	BinDir string
	// HookPath is the installed wsl-gpu-hook binary.
	HookPath string
}

// DefaultOptions are the system paths.
func DefaultOptions() Options {
	return Options{BinDir: "/usr/local/bin", HookPath: "/usr/local/bin/wsl-gpu-hook"}
}

func (o Options) path(p string) string { return filepath.Join(o.Prefix, p) }

// Change is one file or link to create, update or remove.
type Change struct {
	Path   string // as on the target system (without Prefix)
	Old    []byte // nil when the file does not exist
	New    []byte // nil to remove
	Link   string // for symlinks: the target; Old/New unused
	Remove bool   // remove the link or file
}

func (c Change) String() string {
	switch {
	case c.Link != "" && c.Remove:
		return "remove link " + c.Path
	case c.Link != "":
		return "link " + c.Path + " -> " + c.Link
	case c.New == nil:
		return "remove " + c.Path
	case c.Old == nil:
		return "create " + c.Path
	}
	return "update " + c.Path
}

// Plan is the changes for one engine, with what the operator does next.
type Plan struct {
	Changes []Change
	Next    string // e.g. "restart dockerd: systemctl restart docker"
}

const (
	runtimeName   = "wsl-gpu"
	wrapperName   = "wsl-gpu-runtime"
	nvidiaHook    = "nvidia-container-runtime-hook"
	daemonJSON    = "/etc/docker/daemon.json"
	hooksDFile    = "/usr/share/containers/oci/hooks.d/wsl-gpu-hook.json"
	containerdCfg = "/etc/containerd/config.toml"
)

// Docker plans the links Docker's --gpus and --runtime need and the
// daemon.json runtime entry; uninstall plans their removal.
func Docker(o Options, uninstall bool) (*Plan, error) {
	p := &Plan{Next: "restart dockerd so it finds the hook on its PATH and reads daemon.json: systemctl restart docker"}
	for _, name := range []string{nvidiaHook, wrapperName} {
		c, err := linkChange(o, filepath.Join(o.BinDir, name), uninstall)
		if err != nil {
			return nil, err
		}
		if c != nil {
			p.Changes = append(p.Changes, *c)
		}
	}
	old, err := readOptional(o.path(daemonJSON))
	if err != nil {
		return nil, err
	}
	var updated []byte
	if uninstall {
		updated, err = removeRuntime(daemonJSON, old)
	} else {
		updated, err = addRuntime(daemonJSON, old, filepath.Join(o.BinDir, wrapperName))
	}
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(old, updated) {
		p.Changes = append(p.Changes, Change{Path: daemonJSON, Old: old, New: updated})
	}
	return p, nil
}

// linkChange plans name -> HookPath, refusing to take over a name that
// belongs to something else (NVIDIA's toolkit owns nvidia-container-runtime-hook).
func linkChange(o Options, name string, uninstall bool) (*Change, error) {
	target, err := os.Readlink(o.path(name))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if uninstall {
			return nil, nil
		}
		return &Change{Path: name, Link: o.HookPath}, nil
	case err == nil && target == o.HookPath:
		if uninstall {
			return &Change{Path: name, Link: target, Remove: true}, nil
		}
		return nil, nil
	case uninstall:
		return nil, nil // not ours: leave it
	case filepath.Base(name) == nvidiaHook:
		return nil, fmt.Errorf("%s exists and is not wsl-gpu-hook's (NVIDIA's nvidia-container-toolkit installs it): remove the toolkit or use `wsl-gpu-hook install cdi` instead; nothing was changed", name)
	}
	return nil, fmt.Errorf("%s exists and is not a link to %s: remove it or choose another --bin-dir; nothing was changed", name, o.HookPath)
}

func readOptional(p string) ([]byte, error) {
	data, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return data, err
}

// addRuntime returns daemon.json with runtimes.wsl-gpu, or data itself
// when it is already there as wanted.
func addRuntime(path string, data []byte, wrapper string) ([]byte, error) {
	value, _ := json.Marshal(map[string]string{"path": wrapper})
	value = bytes.ReplaceAll(value, []byte(`":"`), []byte(`": "`))
	if len(bytes.TrimSpace(data)) == 0 {
		return []byte("{\n  \"runtimes\": {\n    \"" + runtimeName + "\": " + string(value) + "\n  }\n}\n"), nil
	}
	if err := json.Unmarshal(data, new(map[string]any)); err != nil {
		return nil, jsonError(path, data, err)
	}
	top, err := parseObject(data, 0)
	if err != nil {
		return nil, jsonError(path, data, err)
	}
	rt, _, ok := top.find("runtimes")
	if !ok {
		inner := []byte("{\"" + runtimeName + "\": " + string(value) + "}")
		return insertFirst(data, top, "runtimes", inner), nil
	}
	runtimes, err := parseObject(data, rt.valueStart)
	if err != nil {
		return nil, fmt.Errorf("%s: \"runtimes\" is not an object: fix the file by hand, nothing was changed", path)
	}
	if m, _, ok := runtimes.find(runtimeName); ok {
		var have, want any
		json.Unmarshal(data[m.valueStart:m.valueEnd], &have)
		json.Unmarshal(value, &want)
		if fmt.Sprint(have) == fmt.Sprint(want) {
			return data, nil
		}
		return append(append(append([]byte{}, data[:m.valueStart]...), value...), data[m.valueEnd:]...), nil
	}
	return insertFirst(data, runtimes, runtimeName, value), nil
}

// removeRuntime takes runtimes.wsl-gpu out, and "runtimes" with it when
// nothing else is left in it.
func removeRuntime(path string, data []byte) ([]byte, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return data, nil
	}
	if err := json.Unmarshal(data, new(map[string]any)); err != nil {
		return nil, jsonError(path, data, err)
	}
	top, err := parseObject(data, 0)
	if err != nil {
		return nil, jsonError(path, data, err)
	}
	rt, rti, ok := top.find("runtimes")
	if !ok {
		return data, nil
	}
	runtimes, err := parseObject(data, rt.valueStart)
	if err != nil {
		return data, nil
	}
	_, i, ok := runtimes.find(runtimeName)
	if !ok {
		return data, nil
	}
	if len(runtimes.members) == 1 {
		return removeMember(data, top, rti), nil
	}
	return removeMember(data, runtimes, i), nil
}

// Podman plans the hooks.d file: podman runs the hook for containers
// annotated wsl-gpu-hook/devices (hooks.d cannot match the environment).
func Podman(o Options, uninstall bool) (*Plan, error) {
	p := &Plan{Next: "podman reads hooks.d per container: nothing to restart; ask with --annotation wsl-gpu-hook/devices=all"}
	old, err := readOptional(o.path(hooksDFile))
	if err != nil {
		return nil, err
	}
	want := HooksD(o.HookPath)
	switch {
	case uninstall && old != nil:
		var h struct {
			Hook struct{ Path string } `json:"hook"`
		}
		if json.Unmarshal(old, &h) == nil && h.Hook.Path == o.HookPath {
			p.Changes = append(p.Changes, Change{Path: hooksDFile, Old: old})
		}
	case !uninstall && !bytes.Equal(old, want):
		p.Changes = append(p.Changes, Change{Path: hooksDFile, Old: old, New: want})
	}
	return p, nil
}

// HooksD is the hooks.d file (schema 1.0.0) for the hook at hookPath.
func HooksD(hookPath string) []byte {
	data, _ := json.MarshalIndent(map[string]any{
		"version": "1.0.0",
		"hook":    map[string]any{"path": hookPath, "args": []string{"wsl-gpu-hook", "prestart"}},
		"when":    map[string]any{"annotations": map[string]string{"^wsl-gpu-hook/devices$": ".+"}},
		"stages":  []string{"prestart"},
	}, "", "  ")
	return append(data, '\n')
}

// Apply carries out a plan under o.Prefix.
func Apply(o Options, p *Plan) error {
	for _, c := range p.Changes {
		full := o.path(c.Path)
		switch {
		case c.Link != "" && c.Remove, c.Link == "" && c.New == nil:
			if c.Old != nil {
				if err := os.WriteFile(full+".wsl-gpu-hook.bak", c.Old, 0o644); err != nil {
					return err
				}
			}
			if err := os.Remove(full); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		case c.Link != "":
			if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
				return err
			}
			if err := os.Symlink(c.Link, full); err != nil {
				return err
			}
		default:
			if err := writeAtomic(full, c.Old, c.New); err != nil {
				return err
			}
		}
	}
	return nil
}

func writeAtomic(full string, old, data []byte) error {
	mode := os.FileMode(0o644)
	if fi, err := os.Stat(full); err == nil {
		mode = fi.Mode().Perm()
	}
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		return err
	}
	if old != nil {
		if err := os.WriteFile(full+".wsl-gpu-hook.bak", old, mode); err != nil {
			return fmt.Errorf("back up %s: %w", full, err)
		}
	}
	tmp := full + ".wsl-gpu-hook.tmp"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Chmod(tmp, mode); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, full); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// Diff is a short line diff of a change, for --dry-run.
func Diff(c Change) string {
	if c.Link != "" || c.New == nil && c.Old == nil {
		return c.String() + "\n"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "--- %s\n+++ %s\n", c.Path, c.Path)
	for _, l := range lineDiff(lines(c.Old), lines(c.New)) {
		b.WriteString(l + "\n")
	}
	return b.String()
}

func lines(b []byte) []string {
	if len(b) == 0 {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// lineDiff is an LCS diff: " " kept, "-" removed, "+" added.
func lineDiff(a, b []string) []string {
	n, m := len(a), len(b)
	lcs := make([][]int, n+1)
	for i := range lcs {
		lcs[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out []string
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && a[i] == b[j]:
			out = append(out, " "+a[i])
			i, j = i+1, j+1
		case j < m && (i == n || lcs[i][j+1] > lcs[i+1][j]):
			out = append(out, "+"+b[j])
			j++
		default:
			out = append(out, "-"+a[i])
			i++
		}
	}
	return out
}
