package install

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/wsl"
)

// Options says where the binary is and which tree to work in.
type Options struct {
	// Prefix is prepended to every system path when reading and writing;
	// "" is the real system. Tests use a temporary directory.
	Prefix string
	// BinDir receives the binary's other names (nvidia-container-runtime-hook,
	// wsl-gpu-runtime); it should be on dockerd's PATH.
	BinDir string
	// HookPath is the installed wsl-gpu-hook binary, as the engines will
	// run it (a system path, without Prefix).
	HookPath string
	// Annotation is the OCI annotation that asks for GPUs (the config's
	// request_annotation); "" means DefaultAnnotation.
	Annotation string
	// Owner names the package that owns a system path (dpkg's view), ""
	// for none; nil means no package owns anything. A file a package
	// installed is the package manager's: uninstall leaves it, and install
	// does not rewrite it (see DpkgOwner).
	Owner func(path string) string
}

// owner is o.Owner(p), or "" without an Owner.
func (o Options) owner(p string) string {
	if o.Owner == nil {
		return ""
	}
	return o.Owner(p)
}

// DpkgOwner asks dpkg which package owns path, as `dpkg-query -S` does;
// "" when none does or dpkg is not there.
func DpkgOwner(path string) string {
	out, err := exec.Command("dpkg-query", "-S", path).Output()
	if err != nil {
		return ""
	}
	// "pkg[:arch][, pkg2]: /path"; a diversion line starts "diversion by".
	for _, line := range strings.Split(string(out), "\n") {
		pkgs, p, ok := strings.Cut(line, ": ")
		if ok && p == path && !strings.HasPrefix(pkgs, "diversion by") {
			pkg, _, _ := strings.Cut(pkgs, ",")
			pkg, _, _ = strings.Cut(pkg, ":")
			return strings.TrimSpace(pkg)
		}
	}
	return ""
}

// DefaultAnnotation is the request annotation of the default configuration.
const DefaultAnnotation = "wsl-gpu-hook/devices"

// DefaultOptions are the paths of a `make install` to /usr/local.
func DefaultOptions() Options {
	return Options{
		BinDir:     "/usr/local/bin",
		HookPath:   "/usr/local/bin/wsl-gpu-hook",
		Annotation: DefaultAnnotation,
	}
}

func (o Options) path(p string) string { return filepath.Join(o.Prefix, p) }

func (o Options) annotation() string {
	if o.Annotation == "" {
		return DefaultAnnotation
	}
	return o.Annotation
}

// check reports options a plan cannot be made with.
func (o Options) check() error {
	if !filepath.IsAbs(o.HookPath) || !filepath.IsAbs(o.BinDir) {
		return fmt.Errorf("the hook path %q and bin dir %q must be absolute", o.HookPath, o.BinDir)
	}
	return nil
}

// Plan is what installing or uninstalling one engine changes, and what the
// operator does afterwards.
type Plan struct {
	Changes []Change
	// Next tells the operator what makes the change take effect, e.g.
	// "restart dockerd ...: systemctl restart docker". It only matters when
	// Changes is not empty.
	Next string
	// Warnings are things that will not stop the install but may keep it
	// from working (e.g. BinDir not on dockerd's PATH).
	Warnings []string
}

// Change is one file or symlink to create, update or remove. Paths are
// system paths, without Options.Prefix.
//
// For a file, Old is the content before (nil: the file does not exist) and
// New the content after (nil: remove the file). For a symlink, Link is its
// target and Remove says whether it is made or removed; Old and New are
// unused.
type Change struct {
	Path   string
	Old    []byte
	New    []byte
	Link   string
	Remove bool
}

// Action names what the change does: "create", "update" or "remove" for a
// file, "symlink" or "unlink" for a link.
func (c Change) Action() string {
	switch {
	case c.Link != "" && c.Remove:
		return "unlink"
	case c.Link != "":
		return "symlink"
	case c.Remove || c.New == nil:
		return "remove"
	case c.Old == nil:
		return "create"
	}
	return "update"
}

// Backup is where Apply keeps the previous content of the file, or "" when
// there is none to keep (a new file, or a symlink).
func (c Change) Backup() string {
	if c.Link != "" || c.Old == nil {
		return ""
	}
	return c.Path + backupSuffix
}

// String is the one line a CLI prints for the change, e.g.
// "update /etc/docker/daemon.json (previous content kept in ....bak)".
func (c Change) String() string {
	s := c.Action() + " " + c.Path
	if c.Link != "" {
		s += " -> " + c.Link
	}
	if b := c.Backup(); b != "" {
		s += " (previous content kept in " + b + ")"
	}
	return s
}

const (
	backupSuffix = ".wsl-gpu-hook.bak"

	runtimeName   = wsl.RuntimeName    // Docker runtime and containerd handler name
	wrapperName   = wsl.WrapperName    // the binary as an OCI runtime
	nvidiaHook    = wsl.NvidiaHookName // the name Docker's --gpus runs
	daemonJSON    = "/etc/docker/daemon.json"
	hooksDFile    = "/usr/share/containers/oci/hooks.d/wsl-gpu-hook.json"
	hooksDAdmin   = "/etc/containers/oci/hooks.d/wsl-gpu-hook.json"
	containerdCfg = "/etc/containerd/config.toml"

	// daemonPATH is the PATH systemd gives services that set none, which
	// is where dockerd looks for nvidia-container-runtime-hook.
	daemonPATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
)

// readOptional reads a file under the prefix, through symlinks as Apply
// writes it; a missing file is nil, nil.
func readOptional(o Options, p string) ([]byte, error) {
	full, err := realPath(o, p)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(full)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	if data == nil {
		data = []byte{} // exists but empty: not the same as missing
	}
	return data, nil
}
