package nodesetup

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/atomicfile"
)

// Defaults for a node: the hook copy lives with the node's state, the
// specs in the CDI dir containerd, CRI-O and Docker all read.
const (
	DefaultHookDir = "/var/lib/wsl-gpu-hook"
	DefaultCDIDir  = "/var/run/cdi"
)

// Setup says where things go.
type Setup struct {
	// Root is where the node's / is mounted in this container.
	Root string
	// HookDir (node path) receives the binaries in Binaries; CDIDir (node
	// path) the specs.
	HookDir, CDIDir string
	// Binaries are this container's copies of wsl-gpu-hook and
	// wsl-gpu-ctl, copied into HookDir under their base names.
	Binaries []string
	// Generate runs `wsl-gpu-ctl cdi generate --dir DIR --hook HOOK`;
	// nil runs the wsl-gpu-ctl among Binaries.
	Generate func(dir, hook string) (string, error)
}

func (s Setup) host(p string) string { return filepath.Join(s.Root, p) }

// HookPath is the hook's node path, the one the specs name.
func (s Setup) HookPath() string { return filepath.Join(s.HookDir, "wsl-gpu-hook") }

// Apply copies the binaries when they differ from the node's copies and
// regenerates the specs (written only when they change). It returns one
// line per change.
func (s Setup) Apply() ([]string, error) {
	var changed []string
	if err := s.mkdir(s.HookDir); err != nil {
		return nil, err
	}
	if err := s.mkdir(s.CDIDir); err != nil {
		return nil, err
	}
	for _, src := range s.Binaries {
		data, err := os.ReadFile(src)
		if err != nil {
			return changed, fmt.Errorf("node setup: %w", err)
		}
		dst := s.host(filepath.Join(s.HookDir, filepath.Base(src)))
		if old, err := os.ReadFile(dst); err == nil && bytes.Equal(old, data) {
			continue
		}
		if err := atomicfile.Write(dst, data, 0o755, atomicfile.Owner{}); err != nil {
			return changed, fmt.Errorf("node setup: install %s: %w", dst, err)
		}
		changed = append(changed, "installed "+filepath.Join(s.HookDir, filepath.Base(src)))
	}
	gen := s.Generate
	if gen == nil {
		gen = s.generate
	}
	out, err := gen(s.host(s.CDIDir), s.HookPath())
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.HasPrefix(l, "cdi: wrote ") {
			changed = append(changed, "wrote "+filepath.Join(s.CDIDir, filepath.Base(strings.TrimPrefix(l, "cdi: wrote "))))
		}
	}
	if err != nil {
		return changed, fmt.Errorf("node setup: cdi generate: %w: %s", err, strings.TrimSpace(out))
	}
	return changed, nil
}

func (s Setup) generate(dir, hook string) (string, error) {
	for _, b := range s.Binaries {
		if filepath.Base(b) == "wsl-gpu-ctl" {
			out, err := exec.Command(b, "cdi", "generate", "--dir", dir, "--hook", hook).CombinedOutput()
			return string(out), err
		}
	}
	return "", errors.New("no wsl-gpu-ctl among the binaries")
}

// mkdir creates dir (node path) and records, in a marker inside the
// node's hook dir, each directory it had to create, so Remove takes away
// only what setup made.
func (s Setup) mkdir(dir string) error {
	var missing []string
	for d := dir; d != "/" && d != "."; d = filepath.Dir(d) {
		if _, err := os.Lstat(s.host(d)); err == nil {
			break
		}
		missing = append(missing, d)
	}
	if err := os.MkdirAll(s.host(dir), 0o755); err != nil {
		return fmt.Errorf("node setup: %w", err)
	}
	if len(missing) == 0 {
		return nil
	}
	f, err := os.OpenFile(s.host(filepath.Join(s.HookDir, createdList)), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("node setup: %w", err)
	}
	defer f.Close()
	for _, d := range missing {
		fmt.Fprintln(f, d)
	}
	return nil
}

// createdList names, one node path a line, the directories setup created.
const createdList = ".created-dirs"

// Remove takes away what Apply put on the node: the specs of ours in the
// CDI dir (every name with wsl-gpu-hook in it), the binaries, and the
// directories setup created, when empty. It returns one line per removal.
func (s Setup) Remove() ([]string, error) {
	var removed []string
	var errs []error
	specs, _ := filepath.Glob(filepath.Join(s.host(s.CDIDir), "*wsl-gpu-hook*.json"))
	for _, f := range specs {
		if err := os.Remove(f); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, "removed "+filepath.Join(s.CDIDir, filepath.Base(f)))
	}
	for _, b := range s.Binaries {
		f := s.host(filepath.Join(s.HookDir, filepath.Base(b)))
		if err := os.Remove(f); err == nil {
			removed = append(removed, "removed "+filepath.Join(s.HookDir, filepath.Base(b)))
		} else if !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	list := s.host(filepath.Join(s.HookDir, createdList))
	data, _ := os.ReadFile(list)
	os.Remove(list)
	dirs := strings.Fields(string(data))
	// Deepest first: a dir's parents were listed after it.
	for _, d := range dirs {
		if err := os.Remove(s.host(d)); err == nil {
			removed = append(removed, "removed "+d)
		} else if !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("leave %s: %w", d, err))
		}
	}
	return removed, errors.Join(errs...)
}
