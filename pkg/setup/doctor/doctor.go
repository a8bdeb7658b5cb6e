package doctor

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	securejoin "github.com/cyphar/filepath-securejoin"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/dxcore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/setup/install"
)

// Status is a check's verdict.
type Status string

// Statuses, from good to bad.
const (
	OK   Status = "ok"
	Warn Status = "warn"
	Fail Status = "fail"
)

// Result is one check. The JSON field names are a stable interface.
type Result struct {
	// Check names what was checked: "dxg", "kernel", "adapter 1",
	// "lib dir", "docker runtime", "cdi /etc/cdi/nvidia.yaml", "log".
	Check  string `json:"check"`
	Status Status `json:"status"`
	// Detail is what was found, one line.
	Detail string `json:"detail"`
	// Fix is what to type, when a command fixes it. Commands to run in
	// Windows say so ("in Windows: wsl --shutdown").
	Fix string `json:"fix,omitempty"`
}

// Report is every check in the order they ran.
type Report struct {
	Results []Result `json:"results"`
}

// Failed reports whether any check failed (warnings do not count).
func (r *Report) Failed() bool {
	for _, c := range r.Results {
		if c.Status == Fail {
			return true
		}
	}
	return false
}

// add records a check; every field is made printable (see shown), so
// neither the text nor the JSON report carries a terminal escape.
func (r *Report) add(check string, s Status, fix, format string, args ...any) {
	r.Results = append(r.Results, Result{Check: shown(check), Status: s, Detail: shown(fmt.Sprintf(format, args...)), Fix: shown(fix)})
}

// WriteText prints one line per check: status, check, what was found and
// the fix.
func (r *Report) WriteText(w io.Writer) error {
	for _, c := range r.Results {
		line := fmt.Sprintf("%-4s  %s: %s", c.Status, c.Check, c.Detail)
		if c.Fix != "" {
			line += "  -> fix: " + c.Fix
		}
		if _, err := fmt.Fprintln(w, line); err != nil {
			return err
		}
	}
	return nil
}

// WriteJSON prints the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// Options says where everything is. Zero values take the defaults of a
// real WSL machine (see [Options.withDefaults]).
type Options struct {
	// The hook's configuration: host paths of the device, the lib dir,
	// the drivers dir and the log file ("" disables the log).
	DxgDevice  string
	LibDir     string
	DriversDir string
	LogFile    string
	// ROCmDir is the host's ROCm install, where an AMD container's
	// librocdxg comes from ("" skips the check).
	ROCmDir string
	// NoLog says the configuration disables the log (LogFile "" alone
	// means the default).
	NoLog bool
	// Sysfs is the configuration's sysfs_dir, where a warm start reads
	// which devices the GPU driver is bound to; NoSysfs says it is "".
	Sysfs   string
	NoSysfs bool
	// SonameCache is the configuration's soname_cache, where the lib
	// dir's SONAMEs are kept across boots; NoSonameCache says it is "".
	SonameCache   string
	NoSonameCache bool

	// Root prefixes every engine path: configuration files, hooks.d,
	// the directories searched for binaries, and the CDI dirs.
	Root string
	// CDIDirs are the CDI spec dirs, lowest priority first, without Root
	// (default /etc/cdi, /var/run/cdi).
	CDIDirs []string
	// HostRoot prefixes the host paths CDI specs name when checking
	// they exist; "" is this machine.
	HostRoot string
	// ProcDir is where processes are found (default /proc): dockerd's
	// and containerd's start time and environment.
	ProcDir string
	// Self is the hook binary, to tell our nvidia-container-runtime-hook
	// from NVIDIA's; "" means only links to a file named wsl-gpu-hook
	// count as ours.
	Self string

	// Enumerate lists adapters (default dxcore.Enumerate).
	Enumerate func(device string) (*dxcore.Enumeration, error)
	// Version returns the first line of `<path> --version` for an engine
	// binary (a path under Root), or "" when unknown. Nil runs nothing.
	Version func(path string) string
	// Engine runs an engine's CLI (docker, podman): for the node checks
	// `ps`, `inspect` and an `exec` that lists files in a node; for the
	// host's, `docker info` and `inspect` of Docker Desktop's agent. It returns
	// the CLI's standard output, also when it fails; its error wraps
	// exec.ErrNotFound when the CLI is not on PATH, and carries the CLI's
	// standard error otherwise. Nil runs nothing (no engine is found).
	Engine func(cli string, args ...string) ([]byte, error)
	// Now is the clock, for "recent" log errors (default time.Now).
	Now func() time.Time
	// Euid is the effective uid, for the open check (default os.Geteuid).
	Euid *int
}

// Default paths of a real WSL machine.
const (
	DefaultDxgDevice  = "/dev/dxg"
	DefaultLibDir     = "/usr/lib/wsl/lib"
	DefaultDriversDir = "/usr/lib/wsl/drivers"
	DefaultLogFile    = "/var/log/wsl-gpu-hook.log"
)

// install is the view of Root that install reads engine files in.
func (o Options) install() install.Options { return install.Options{Prefix: o.Root} }

func (o Options) withDefaults() Options {
	def := func(p *string, v string) {
		if *p == "" {
			*p = v
		}
	}
	def(&o.DxgDevice, DefaultDxgDevice)
	def(&o.LibDir, DefaultLibDir)
	def(&o.DriversDir, DefaultDriversDir)
	if !o.NoLog {
		def(&o.LogFile, DefaultLogFile)
	}
	if !o.NoSysfs {
		def(&o.Sysfs, "/sys")
	}
	if !o.NoSonameCache {
		def(&o.SonameCache, "/var/cache/wsl-gpu-hook")
	}
	def(&o.ProcDir, "/proc")
	if len(o.CDIDirs) == 0 {
		o.CDIDirs = []string{"/etc/cdi", "/var/run/cdi"}
	}
	if o.Enumerate == nil {
		o.Enumerate = dxcore.Enumerate
	}
	if o.Version == nil {
		o.Version = func(string) string { return "" }
	}
	if o.Engine == nil {
		o.Engine = func(cli string, _ ...string) ([]byte, error) {
			return nil, fmt.Errorf("%s: %w", cli, exec.ErrNotFound)
		}
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Euid == nil {
		e := os.Geteuid()
		o.Euid = &e
	}
	return o
}

// path is an engine path under Root with every link but the last resolved
// inside Root, for Lstat and Readlink. Root is a tree of its own (a chroot,
// a test tree): an absolute link in it points inside it, never at this
// machine's files.
func (o Options) path(p string) string {
	if o.Root == "" {
		return p
	}
	dir, err := securejoin.SecureJoin(o.Root, filepath.Dir(p))
	if err != nil {
		return filepath.Join(o.Root, p)
	}
	return filepath.Join(dir, filepath.Base(p))
}

// resolved is an engine path under Root with every link resolved inside
// Root, for Stat and reading.
func (o Options) resolved(p string) string {
	if o.Root == "" {
		return p
	}
	full, err := securejoin.SecureJoin(o.Root, p)
	if err != nil {
		return filepath.Join(o.Root, p)
	}
	return full
}

// Run performs every check.
func Run(opt Options) *Report {
	o := opt.withDefaults()
	r := &Report{}
	checkGPU(o, r)
	specs := checkCDI(o, r)
	checkDocker(o, r, specs)
	checkDockerDesktop(o, r)
	checkRancherDesktop(o, r, specs)
	checkPodman(o, r, specs)
	checkContainerd(o, r)
	checkLog(o, r)
	return r
}
