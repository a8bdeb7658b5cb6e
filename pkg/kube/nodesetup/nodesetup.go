package nodesetup

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	cdi "tags.cncf.io/container-device-interface/specs-go"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/setup/cdispec"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/atomicfile"
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
	// Owner owns the hook copies and the manifest. The zero value is
	// root, whoever runs setup: engines run the hook copy as root, so a
	// copy another user owned would be theirs to replace, and a setup that
	// cannot make it root's fails instead. Tests run by an ordinary user
	// set atomicfile.Keep.
	Owner atomicfile.Owner
}

func (s Setup) host(p string) string { return filepath.Join(s.Root, p) }

// HookPath is the hook's node path, the one the specs name.
func (s Setup) HookPath() string { return filepath.Join(s.HookDir, "wsl-gpu-hook") }

// ManifestName is the manifest's name in the hook dir.
const ManifestName = "node-setup.json"

// legacyCreatedList is where versions before the manifest listed the
// directories they created; Remove still reads it.
const legacyCreatedList = ".created-dirs"

// manifest is what setup wrote on the node, as node paths.
type manifest struct {
	Files []string `json:"files"`
	Dirs  []string `json:"dirs"`
}

func (s Setup) manifestPath() string { return s.host(filepath.Join(s.HookDir, ManifestName)) }

func (s Setup) readManifest() (manifest, error) {
	var m manifest
	data, err := os.ReadFile(s.manifestPath())
	if errors.Is(err, os.ErrNotExist) {
		return m, nil
	}
	if err != nil {
		return m, fmt.Errorf("node setup: read the manifest: %w", err)
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return m, fmt.Errorf("node setup: manifest %s: %w: remove it; the next start writes it anew", filepath.Join(s.HookDir, ManifestName), err)
	}
	return m, nil
}

// record adds files and dirs to the manifest, writing it only when it
// grows.
func (s Setup) record(files, dirs []string) error {
	m, err := s.readManifest()
	if err != nil {
		return err
	}
	n := len(m.Files) + len(m.Dirs)
	for _, f := range files {
		if !slices.Contains(m.Files, f) {
			m.Files = append(m.Files, f)
		}
	}
	for _, d := range dirs {
		if !slices.Contains(m.Dirs, d) {
			m.Dirs = append(m.Dirs, d)
		}
	}
	if len(m.Files)+len(m.Dirs) == n {
		return nil
	}
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.Write(s.manifestPath(), append(data, '\n'), 0o644, s.Owner); err != nil {
		return fmt.Errorf("node setup: write the manifest: %w", err)
	}
	return nil
}

// specFiles are the node paths of every static spec `cdi generate` may
// write into the CDI dir.
func (s Setup) specFiles() []string {
	out := []string{filepath.Join(s.CDIDir, cdispec.FileName(cdispec.Kind))}
	for _, vk := range cdispec.VendorKinds {
		out = append(out, filepath.Join(s.CDIDir, cdispec.FileName(vk.Kind)))
	}
	return out
}

// ForeignSpecError is a spec file in the CDI dir under one of the names
// setup writes that another installer wrote (the host package's `install
// cdi`, a wsl-gpu-hook elsewhere): its hooks run another binary than the
// hook copy. Setup neither overwrites nor records it, so the uninstall
// leaves it too.
type ForeignSpecError struct {
	File string // node path
	Hook string // what its hooks run ("" when it is not a spec of ours at all)
}

func (e *ForeignSpecError) Error() string {
	what := "is not a spec of this node setup"
	if e.Hook != "" {
		what = "is another installation's CDI spec (its hooks run " + e.Hook + ")"
	}
	return fmt.Sprintf("node setup: %s %s: left as it is and no spec written; remove it if that installation is gone, or set nodeSetup.cdiDir to another CDI dir", e.File, what)
}

// owns says whether data, a spec file's content, is this setup's: a CDI
// spec whose every hook runs the hook copy. That is what `cdi generate
// --hook HookPath()` writes, and nothing another installer writes: the
// host package's and the tarball's specs run their own binaries. It
// returns what a foreign spec's hooks run, for the error.
func (s Setup) owns(data []byte) (bool, string) {
	var spec cdi.Spec
	if err := json.Unmarshal(data, &spec); err != nil {
		return false, ""
	}
	edits := []cdi.ContainerEdits{spec.ContainerEdits}
	for _, d := range spec.Devices {
		edits = append(edits, d.ContainerEdits)
	}
	other, n := "", 0
	for _, e := range edits {
		for _, h := range e.Hooks {
			if h == nil {
				continue
			}
			n++
			if h.Path != s.HookPath() && other == "" {
				other = h.Path
			}
		}
	}
	return n > 0 && other == "", other
}

// claim returns the spec files setup may write: each one absent or
// already its own. A spec file under one of its names that another
// installer wrote is a ForeignSpecError: `cdi generate` would overwrite
// it, and the uninstall would then remove it.
func (s Setup) claim() ([]string, error) {
	var mine []string
	for _, f := range s.specFiles() {
		data, err := os.ReadFile(s.host(f))
		if errors.Is(err, os.ErrNotExist) {
			mine = append(mine, f)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("node setup: %w", err)
		}
		if ok, hook := s.owns(data); !ok {
			return nil, &ForeignSpecError{File: f, Hook: hook}
		}
		mine = append(mine, f)
	}
	return mine, nil
}

// Apply copies the binaries when they differ from the node's copies and
// regenerates the specs (written only when they change), having recorded
// every name it may write. A spec file of another installer under one of
// those names stops the regeneration (a ForeignSpecError), so it is never
// overwritten or recorded. It returns one line per change.
func (s Setup) Apply() ([]string, error) {
	var changed []string
	if err := s.mkdir(s.HookDir); err != nil {
		return nil, err
	}
	if err := s.mkdir(s.CDIDir); err != nil {
		return nil, err
	}
	var files []string
	for _, b := range s.Binaries {
		files = append(files, filepath.Join(s.HookDir, filepath.Base(b)))
	}
	specs, foreign := s.claim()
	if foreign != nil && !errors.As(foreign, new(*ForeignSpecError)) {
		return nil, foreign
	}
	if err := s.record(append(specs, files...), nil); err != nil {
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
		if err := atomicfile.Write(dst, data, 0o755, s.Owner); err != nil {
			return changed, fmt.Errorf("node setup: install %s: %w", dst, err)
		}
		changed = append(changed, "installed "+filepath.Join(s.HookDir, filepath.Base(src)))
	}
	if foreign != nil {
		return changed, foreign
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

// mkdir creates dir (node path) and records each directory it had to
// create, so Remove takes away only what setup made. The manifest lives
// in the hook dir, so the hook dir is made first.
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
	return s.record(nil, missing)
}

// Keep applies the setup now and every interval until ctx ends (a driver
// update or a new adapter changes the specs), logging each change and each
// new failure once. It removes nothing when ctx ends.
func (s Setup) Keep(ctx context.Context, interval time.Duration, log *slog.Logger) {
	lastErr := ""
	for {
		changed, err := s.Apply()
		for _, c := range changed {
			log.Info("node setup: " + c)
		}
		switch {
		case err != nil && err.Error() != lastErr:
			log.Warn("node setup failed; retrying every interval", "err", err)
			lastErr = err.Error()
		case err == nil && lastErr != "":
			log.Info("node setup works again")
			lastErr = ""
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(interval):
		}
	}
}

// Remove takes away what setup recorded writing: the files in the
// manifest (a spec only while it is still setup's own, see owns), then the directories it created (deepest first) when empty,
// then the manifest. It is for the chart's uninstall only. It returns one
// line per removal.
func (s Setup) Remove() ([]string, error) {
	m, err := s.readManifest()
	if err != nil {
		return nil, err
	}
	if data, err := os.ReadFile(s.host(filepath.Join(s.HookDir, legacyCreatedList))); err == nil {
		m.Dirs = append(m.Dirs, strings.Fields(string(data))...)
	}
	var removed []string
	var errs []error
	for _, f := range m.Files {
		// A spec name recorded (by this version or an older one, which
		// recorded every name it might write) whose file another
		// installer wrote since stays: only the hook dir is setup's alone.
		if filepath.Dir(f) != filepath.Clean(s.HookDir) {
			data, err := os.ReadFile(s.host(f))
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if ok, _ := s.owns(data); !ok {
				continue
			}
		}
		if err := os.Remove(s.host(f)); err == nil {
			removed = append(removed, "removed "+f)
		} else if !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	for _, f := range []string{legacyCreatedList, ManifestName} {
		if err := os.Remove(s.host(filepath.Join(s.HookDir, f))); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	// Deepest first, whatever order they were recorded in.
	slices.SortFunc(m.Dirs, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	for _, d := range slices.Compact(m.Dirs) {
		// A directory that now holds others' files stays, as it should.
		if err := os.Remove(s.host(d)); err == nil {
			removed = append(removed, "removed "+d)
		} else if !errors.Is(err, os.ErrNotExist) && !errors.Is(err, syscall.ENOTEMPTY) && !errors.Is(err, syscall.EEXIST) {
			errs = append(errs, fmt.Errorf("leave %s: %w", d, err))
		}
	}
	return removed, errors.Join(errs...)
}
