package install

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/pelletier/go-toml/v2"
)

const (
	blockBegin = "# BEGIN wsl-gpu-hook (managed by `wsl-gpu-hook install containerd`; removed by `wsl-gpu-hook uninstall containerd`)\n"
	blockEnd   = "# END wsl-gpu-hook\n"
)

// criPlugin is the CRI runtime plugin's name per config version.
var criPlugin = map[int64]string{2: "io.containerd.grpc.v1.cri", 3: "io.containerd.cri.v1.runtime"}

// Containerd plans the wsl-gpu runtime handler in config.toml.
func Containerd(o Options, uninstall bool) (*Plan, error) {
	p := &Plan{Next: "restart containerd to load the handler: systemctl restart containerd; then kubectl apply -f config/kubernetes/runtimeclass.yaml"}
	old, err := readOptional(o.path(containerdCfg))
	if err != nil {
		return nil, err
	}
	rest, hadBlock, err := cutBlock(containerdCfg, old)
	if err != nil {
		return nil, err
	}
	if uninstall {
		if hadBlock {
			p.Changes = append(p.Changes, Change{Path: containerdCfg, Old: old, New: rest})
		}
		return p, nil
	}
	var cfg map[string]any
	if err := toml.Unmarshal(rest, &cfg); err != nil {
		return nil, tomlError(containerdCfg, err)
	}
	version, _ := cfg["version"].(int64)
	if len(bytes.TrimSpace(rest)) == 0 {
		version, rest = 2, []byte("version = 2\n")
	}
	plugin, ok := criPlugin[version]
	if !ok {
		return nil, fmt.Errorf("%s: config version %d: only versions 2 (containerd 1.x) and 3 (2.x) are supported: run `containerd config migrate` or add version = 2; nothing was changed", containerdCfg, version)
	}
	runtimes := lookup(cfg, "plugins", plugin, "containerd", "runtimes")
	if _, taken := runtimes[runtimeName]; taken {
		return nil, fmt.Errorf("%s: a runtime %q is already configured outside wsl-gpu-hook's block: remove it or leave it; nothing was changed", containerdCfg, runtimeName)
	}
	_, hasRunc := runtimes["runc"]
	block := handlerBlock(plugin, filepath.Join(o.BinDir, wrapperName), !hasRunc)
	updated := append(append(append([]byte{}, rest...), '\n'), block...)
	if err := toml.Unmarshal(updated, new(map[string]any)); err != nil {
		return nil, fmt.Errorf("%s: the file would not parse with the handler added (%v): add config/containerd/config-v%d.toml by hand; nothing was changed", containerdCfg, err, version)
	}
	if !bytes.Equal(old, updated) {
		p.Changes = append(p.Changes, Change{Path: containerdCfg, Old: old, New: updated})
	}
	return p, nil
}

// handlerBlock is the appended block. Any runtimes table replaces
// containerd's built-in map, so a file that relied on the built-in runc
// entry gets it written out too, or every other pod would lose its runtime.
func handlerBlock(plugin, wrapper string, withRunc bool) []byte {
	var b strings.Builder
	b.WriteString(blockBegin)
	base := fmt.Sprintf("plugins.%q.containerd.runtimes", plugin)
	if withRunc {
		fmt.Fprintf(&b, "[%s.runc]\n  runtime_type = \"io.containerd.runc.v2\"\n", base)
	}
	fmt.Fprintf(&b, "[%s.%s]\n  runtime_type = \"io.containerd.runc.v2\"\n  pod_annotations = [\"wsl-gpu-hook/*\"]\n  container_annotations = [\"wsl-gpu-hook/*\"]\n", base, runtimeName)
	fmt.Fprintf(&b, "[%s.%s.options]\n  BinaryName = %q\n", base, runtimeName, wrapper)
	b.WriteString(blockEnd)
	return []byte(b.String())
}

// cutBlock returns data without our block (and the newline put before it).
func cutBlock(path string, data []byte) ([]byte, bool, error) {
	start := bytes.Index(data, []byte(blockBegin))
	if start < 0 {
		return data, false, nil
	}
	end := bytes.Index(data[start:], []byte(blockEnd))
	if end < 0 {
		return nil, false, fmt.Errorf("%s: wsl-gpu-hook's block has no end line: fix the file by hand; nothing was changed", path)
	}
	end += start + len(blockEnd)
	if start > 0 && data[start-1] == '\n' {
		start--
	}
	return append(append([]byte{}, data[:start]...), data[end:]...), true, nil
}

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

func tomlError(path string, err error) error {
	var de *toml.DecodeError
	if errors.As(err, &de) {
		row, col := de.Position()
		return fmt.Errorf("%s:%d:%d: %v: fix the file by hand; nothing was changed", path, row, col, err)
	}
	return fmt.Errorf("%s: %v: fix the file by hand; nothing was changed", path, err)
}
