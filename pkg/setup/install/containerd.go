package install

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/pelletier/go-toml/v2"
)

// The block's first and last lines. A BEGIN line is recognized by its
// prefix, so a block written by another version of this tool is found.
const (
	blockBegin = "# BEGIN wsl-gpu-hook"
	blockEnd   = "# END wsl-gpu-hook"
	beginLine  = blockBegin + " (written by `wsl-gpu-hook install containerd`, removed by `wsl-gpu-hook uninstall containerd`)\n"
	endLine    = blockEnd + "\n"
)

// criPlugin is the CRI plugin that holds runtime handlers, by config
// version: 1 and 2 are containerd 1.x (version 1 names plugins by short
// id, and containerd 1.x converts it), 3 is containerd 2.x.
var criPlugin = map[int64]string{1: "cri", 2: "io.containerd.grpc.v1.cri", 3: "io.containerd.cri.v1.runtime"}

// Containerd plans the runtime handler "wsl-gpu" in containerd's
// config.toml, for Kubernetes RuntimeClasses: runc's shim with the
// wsl-gpu-runtime wrapper as its binary, passing the request annotation
// from pods and containers through.
//
// The handler is a block appended at the end of the file, so no key or
// comment elsewhere changes; the whole result must parse, and a wsl-gpu
// handler already defined outside the block is refused. The table names
// follow the file's version key (2: containerd 1.x, 3: containerd 2.x; a
// file without one is version 1, which containerd 1.x still reads). A
// missing or empty file gets a version = 2 line inside the block.
//
// Any runtimes table replaces containerd's built-in runtime map (checked
// with containerd 1.6's `config dump`), so when the file configures no
// runtime at all, the block also writes out the built-in runc handler;
// otherwise every pod would lose its default runtime. The handler copies
// runc's options (SystemdCgroup above all, which must match the
// kubelet's cgroup driver), except BinaryName.
func Containerd(o Options, uninstall bool) (*Plan, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	p := &Plan{Next: "restart containerd to load the wsl-gpu handler: systemctl restart containerd; for Kubernetes, add a RuntimeClass with handler wsl-gpu (config/kubernetes/runtimeclass.yaml)"}
	if uninstall {
		p.Next = "restart containerd to drop the wsl-gpu handler: systemctl restart containerd"
	}
	old, err := readOptional(o, containerdCfg)
	if err != nil {
		return nil, refuse([]error{err})
	}
	updated, warnings, err := containerdConfig(old, o, uninstall)
	if err != nil {
		return nil, refuse([]error{err})
	}
	p.Warnings = warnings
	if !bytes.Equal(old, updated) || (old == nil) != (updated == nil) {
		p.Changes = append(p.Changes, Change{Path: containerdCfg, Old: old, New: updated})
	}
	return p, nil
}

// containerdConfig returns config.toml with the block (re)written, or
// without it for uninstall; nil means no file.
func containerdConfig(old []byte, o Options, uninstall bool) ([]byte, []string, error) {
	rest, had, err := cutBlock(containerdCfg, old)
	if err != nil {
		return nil, nil, err
	}
	var cfg map[string]any
	if err := toml.Unmarshal(rest, &cfg); err != nil {
		return nil, nil, tomlError(containerdCfg, err)
	}
	if uninstall {
		if !had {
			return old, nil, nil
		}
		// A block another wsl-gpu-hook's install wrote (the package's
		// beside a tarball's) runs its wrapper, which still works.
		if other := blockWrapper(old); other != "" && other != filepath.Join(o.BinDir, wrapperName) {
			return old, []string{fmt.Sprintf("%s: wsl-gpu-hook's block runs %s, another wsl-gpu-hook's, and stays: uninstall containerd with that one, or remove the block by hand", containerdCfg, other)}, nil
		}
		return rest, nil, nil
	}

	version, fresh, err := configVersion(cfg)
	if err != nil {
		return nil, nil, err
	}
	plugin := criPlugin[version]
	runtimes := lookup(cfg, "plugins", plugin, "containerd", "runtimes")
	if _, taken := runtimes[runtimeName]; taken {
		return nil, nil, fmt.Errorf("%s: [plugins.%q.containerd.runtimes.%s] is already defined outside wsl-gpu-hook's block: remove it to let wsl-gpu-hook manage it, or keep yours and skip this install", containerdCfg, plugin, runtimeName)
	}
	var warnings []string
	if imports, _ := cfg["imports"].([]any); len(imports) > 0 {
		warnings = append(warnings, fmt.Sprintf("%s imports other files: a CRI plugin section in one of them replaces this file's, handler included", containerdCfg))
	}
	wrapper := filepath.Join(o.BinDir, wrapperName)
	block, err := handlerBlock(handler{
		version:     version,
		fresh:       fresh,
		plugin:      plugin,
		wrapper:     wrapper,
		annotations: passAnnotations(o.annotation()),
		withRunc:    len(runtimes) == 0,
		options:     lookup(runtimes, "runc", "options"),
	})
	if err != nil {
		return nil, nil, err
	}
	updated := slices.Clone(rest)
	if len(updated) > 0 {
		// One newline ends the file's last line (if it had none) or
		// leaves a blank line; cutBlock takes exactly this one back.
		updated = append(updated, '\n')
	}
	updated = append(updated, block...)
	if err := checkHandler(updated, plugin, wrapper); err != nil {
		return nil, nil, fmt.Errorf("%s: with the handler appended the file does not parse (%v): add the wsl-gpu handler by hand where the file defines its runtimes", containerdCfg, err)
	}
	return updated, warnings, nil
}

// blockWrapper is the BinaryName of the wsl-gpu handler in a config.toml
// that holds wsl-gpu-hook's block, under whichever CRI plugin it is; ""
// when the file does not parse or names none.
func blockWrapper(data []byte) string {
	var cfg map[string]any
	if toml.Unmarshal(data, &cfg) != nil {
		return ""
	}
	for _, plugin := range criPlugin {
		if b, ok := lookup(cfg, "plugins", plugin, "containerd", "runtimes", runtimeName, "options")["BinaryName"].(string); ok {
			return b
		}
	}
	return ""
}

// configVersion reads the top-level version key. fresh means the file
// sets nothing at all, so the block may set version = 2 itself.
func configVersion(cfg map[string]any) (version int64, fresh bool, err error) {
	v, ok := cfg["version"]
	if !ok {
		if len(cfg) == 0 {
			return 2, true, nil
		}
		return 1, false, nil
	}
	version, ok = v.(int64)
	if _, known := criPlugin[version]; !ok || !known {
		return 0, false, fmt.Errorf("%s: version = %v: wsl-gpu-hook knows config versions 1 and 2 (containerd 1.x) and 3 (containerd 2.x): fix the version key", containerdCfg, v)
	}
	return version, false, nil
}

// passAnnotations are the handler's pod_annotations and
// container_annotations: everything under wsl-gpu-hook/, and the request
// annotation when the configuration moved it elsewhere.
func passAnnotations(annotation string) []string {
	list := []string{"wsl-gpu-hook/*"}
	if !strings.HasPrefix(annotation, "wsl-gpu-hook/") {
		list = append(list, annotation)
	}
	return list
}

// handler is what goes into the block.
type handler struct {
	version     int64
	fresh       bool   // write version = 2 too
	plugin      string // the CRI plugin's table name
	wrapper     string // BinaryName
	annotations []string
	withRunc    bool           // write out the built-in runc handler too
	options     map[string]any // runc's options, copied
}

// handlerBlock renders the block, both delimiter lines included.
func handlerBlock(h handler) ([]byte, error) {
	var b strings.Builder
	b.WriteString(beginLine)
	if h.fresh {
		b.WriteString("version = 2\n")
	}
	base := fmt.Sprintf("plugins.%s.containerd.runtimes", tomlKey(h.plugin))
	if h.withRunc {
		fmt.Fprintf(&b, "[%s.runc]\n  runtime_type = \"io.containerd.runc.v2\"\n", base)
	}
	quoted := make([]string, len(h.annotations))
	for i, a := range h.annotations {
		quoted[i] = tomlString(a)
	}
	list := "[" + strings.Join(quoted, ", ") + "]"
	fmt.Fprintf(&b, "[%s.%s]\n  runtime_type = \"io.containerd.runc.v2\"\n  pod_annotations = %s\n  container_annotations = %s\n", base, runtimeName, list, list)
	fmt.Fprintf(&b, "[%s.%s.options]\n  BinaryName = %s\n", base, runtimeName, tomlString(h.wrapper))
	copied := map[string]any{}
	for k, v := range h.options {
		if k != "BinaryName" && !zeroOption(v) {
			copied[k] = v
		}
	}
	if len(copied) > 0 {
		text, err := toml.Marshal(copied)
		if err != nil {
			return nil, fmt.Errorf("copy runc's options: %w", err)
		}
		for _, line := range strings.SplitAfter(strings.TrimSuffix(string(text), "\n"), "\n") {
			b.WriteString("  " + line)
		}
		b.WriteString("\n")
	}
	b.WriteString(endLine)
	return []byte(b.String()), nil
}

// zeroOption reports whether a runc option is a default (zero) value,
// which need not be copied, or a table, which runc's options never hold.
func zeroOption(v any) bool {
	switch v := v.(type) {
	case string:
		return v == ""
	case bool:
		return !v
	case int64:
		return v == 0
	case float64:
		return v == 0
	case []any:
		return len(v) == 0
	case map[string]any:
		return true
	}
	return false
}

// checkHandler makes sure the file parses and defines the handler as
// intended.
func checkHandler(data []byte, plugin, wrapper string) error {
	var cfg map[string]any
	if err := toml.Unmarshal(data, &cfg); err != nil {
		return err
	}
	opts := lookup(cfg, "plugins", plugin, "containerd", "runtimes", runtimeName, "options")
	if opts["BinaryName"] != wrapper {
		return errors.New("the handler's BinaryName does not read back")
	}
	return nil
}

// cutBlock returns data without wsl-gpu-hook's block and the one newline
// put before it, and whether there was a block.
func cutBlock(name string, data []byte) ([]byte, bool, error) {
	start := lineStarting(data, blockBegin, 0)
	if start < 0 {
		return data, false, nil
	}
	endAt := lineStarting(data, blockEnd, start)
	if endAt < 0 {
		line, _ := lineCol(data, start)
		return nil, false, fmt.Errorf("%s:%d: wsl-gpu-hook's block has no %q line: fix the file by hand", name, line, blockEnd)
	}
	end := endAt + len(blockEnd)
	if end < len(data) && data[end] == '\n' {
		end++
	}
	if start > 0 {
		start-- // the newline Containerd put before the block
	}
	out := slices.Concat(data[:start], data[end:]) // nil when nothing is left: the file is removed
	if lineStarting(out, blockBegin, 0) >= 0 {
		line, _ := lineCol(data, end+lineStarting(data[end:], blockBegin, 0))
		return nil, false, fmt.Errorf("%s:%d: a second wsl-gpu-hook block: remove one by hand", name, line)
	}
	return out, true, nil
}

// lineStarting is the offset of the first line at or after from that
// starts with prefix, or -1.
func lineStarting(data []byte, prefix string, from int) int {
	for i := from; i < len(data); {
		if (i == 0 || data[i-1] == '\n') && bytes.HasPrefix(data[i:], []byte(prefix)) {
			return i
		}
		nl := bytes.IndexByte(data[i:], '\n')
		if nl < 0 {
			return -1
		}
		i += nl + 1
	}
	return -1
}

// lookup walks nested tables; a missing or non-table step gives nil.
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

// tomlKey is s as a TOML key: bare when it can be, quoted otherwise.
func tomlKey(s string) string {
	bare := s != ""
	for _, r := range s {
		bare = bare && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_')
	}
	if bare {
		return s
	}
	return tomlString(s)
}

// tomlString quotes s as a TOML basic string.
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, "\\u%04X", r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// tomlError names the file, line and column of a parse error.
func tomlError(name string, err error) error {
	var de *toml.DecodeError
	if errors.As(err, &de) {
		row, col := de.Position()
		return fmt.Errorf("%s:%d:%d: %v: fix the file by hand", name, row, col, err)
	}
	return fmt.Errorf("%s: %v: fix the file by hand", name, err)
}
