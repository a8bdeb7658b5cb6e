// Package config loads the hook's configuration: /etc/wsl-gpu-hook/config.toml.
//
// Default is the one source of defaults; Load decodes a file strictly on top
// of them (an unknown key is an error, never silently ignored, because a
// misspelled key on a root-run hook would otherwise quietly do the wrong
// thing); Validate reports every problem at once with the file, the key and
// what is allowed. A missing file means the defaults.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/smallfile"

	"github.com/pelletier/go-toml/v2"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/vendors"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/wsl"
)

// DefaultPath is where the hook looks when no --config is given.
const DefaultPath = "/etc/wsl-gpu-hook/config.toml"

// Env names the configuration file for callers that cannot add arguments:
// Docker runs the hook as "nvidia-container-runtime-hook prestart", and the
// runtime wrapper must pass every argument to the real runtime untouched.
const Env = "WSL_GPU_HOOK_CONFIG"

// MaxFileSize bounds the configuration file: the shipped one is 3 KiB.
const MaxFileSize = 1 << 20

// Find is the one rule for which file to read: the --config flag, else
// $WSL_GPU_HOOK_CONFIG (getenv's answer), else DefaultPath. A file named
// by the flag or the variable must exist; the default may be missing.
func Find(flag string, getenv func(string) string) (path string, mustExist bool) {
	if flag != "" {
		return flag, true
	}
	if p := getenv(Env); p != "" {
		return p, true
	}
	return DefaultPath, false
}

// Loader-cache methods.
const (
	// LdcacheBuiltin writes the container's /etc/ld.so.cache from Go: no
	// binary from the image runs, and it costs well under a millisecond.
	LdcacheBuiltin = "builtin"
	// LdcacheNone leaves the cache alone; only the ld.so.conf.d entry is
	// written, so a later ldconfig in the container picks the libraries up.
	LdcacheNone = "none"
)

// Config is the whole configuration. Paths are host paths: inside the
// container the device and folders always appear at their WSL paths.
type Config struct {
	// DxgDevice is the host's GPU paravirtualization device.
	DxgDevice string `toml:"dxg_device"`
	// LibDir is the host folder Windows fills with user-mode libraries.
	LibDir string `toml:"lib_dir"`
	// DriversDir is the host folder holding one driver store folder per driver.
	DriversDir string `toml:"drivers_dir"`
	// Ldcache is how the container's loader learns about LibDir.
	Ldcache string `toml:"ldcache"`
	// LogFile receives the hook's log; "" disables file logging.
	LogFile string `toml:"log_file"`
	// LogLevel is a logrus level name.
	LogLevel string `toml:"log_level"`
	// LogSyslog is the syslog socket where a hook that cannot open LogFile
	// (one in a container's own user namespace) sends its warnings and
	// errors; "" sends them nowhere but stderr.
	LogSyslog string `toml:"log_syslog"`
	// RequestEnv lists the container environment variables that ask for
	// GPUs, first non-empty wins.
	RequestEnv []string `toml:"request_env"`
	// Runtime is the real OCI runtime the wrapper (wsl-gpu-runtime) runs.
	Runtime string `toml:"runtime"`
	// RequestAnnotation is the OCI annotation that asks for GPUs; it wins
	// over the environment. "" disables it.
	RequestAnnotation string `toml:"request_annotation"`
	// ROCmDir is the host's ROCm install, where librocdxg is found.
	ROCmDir string `toml:"rocm_dir"`
	// DRIDir holds the host's DRM nodes, given to video containers.
	DRIDir string `toml:"dri_dir"`
	// WSLgDir holds WSLg's sockets, given to display containers.
	WSLgDir string `toml:"wslg_dir"`
	// ProbeCache is the directory (on a tmpfs such as /run) where a start
	// keeps what it learned of the host, so the next start validates it
	// instead of asking the Windows host again (package probecache); ""
	// disables it.
	ProbeCache string `toml:"probe_cache"`
	// SonameCache is the directory (on a disk, such as /var/cache) where
	// the lib dir's SONAMEs are kept across boots, so that the first start
	// after WSL boots stats each library instead of reading its ELF
	// headers (probecache.Sonames); "" disables it. The hook never makes
	// it (the .deb ships it).
	SonameCache string `toml:"soname_cache"`
	// SysfsDir is the sysfs root where a start with a cached probe reads
	// which devices the GPU driver (dxgkrnl) is bound to: when they are the
	// ones the cache was made with, the start does not open DxgDevice,
	// which on WSL costs two round trips to the Windows host (package
	// dxgsysfs); "" always opens it.
	SysfsDir string `toml:"sysfs_dir"`
	// DevicePlugin configures wsl-gpu-device-plugin, the kubelet plugin.
	DevicePlugin DevicePlugin `toml:"device_plugin"`

	// path is the file the values came from, for error messages.
	path string
}

// DevicePlugin is the [device_plugin] table: which extended resource each
// vendor's adapters are advertised under ("" advertises none), how many
// pods may share one adapter, and whether Allocate names CDI devices.
type DevicePlugin struct {
	// Resources are the vendors' keys, one per row of the vendor table
	// with a default resource (resources.go, generated from the table).
	// Embedded, so go-toml takes its fields as keys of this table.
	Resources
	// NPUResource is for compute-only accelerators that are not GPUs
	// (NPUs), whatever their vendor.
	NPUResource string `toml:"npu_resource"`
	Replicas    int    `toml:"replicas"`
	CDI         bool   `toml:"cdi"`
}

// Default returns the built-in configuration, the one a real WSL host needs.
func Default() Config {
	return Config{
		DxgDevice:         wsl.Device,
		LibDir:            wsl.LibDir,
		DriversDir:        wsl.DriversDir,
		Ldcache:           LdcacheBuiltin,
		LogFile:           "/var/log/wsl-gpu-hook.log",
		LogLevel:          "info",
		LogSyslog:         "/dev/log",
		RequestEnv:        []string{"WSL_GPU_DEVICES", "NVIDIA_VISIBLE_DEVICES"},
		RequestAnnotation: "wsl-gpu-hook/devices",
		Runtime:           "runc",
		ROCmDir:           "/opt/rocm",
		DRIDir:            "/dev/dri",
		WSLgDir:           "/mnt/wslg",
		ProbeCache:        "/run/wsl-gpu-hook",
		SonameCache:       "/var/cache/wsl-gpu-hook",
		SysfsDir:          "/sys",
		DevicePlugin: DevicePlugin{
			Resources:   defaultResources(),
			NPUResource: vendors.NPUResource,
			Replicas:    1,
			CDI:         true,
		},
	}
}

// defaultResources are the vendor table's resource names.
func defaultResources() Resources {
	var r Resources
	for _, row := range vendors.Rows() {
		if p := r.field(row.Name); p != nil {
			*p = row.Resource
		}
	}
	return r
}

// Of returns the resource vendor v's GPUs are advertised under ("" for
// none), and false when the vendor table gives v no key (Microsoft's
// adapters are advertised under Unknown's).
func (r Resources) Of(v vendors.Name) (string, bool) {
	if p := r.field(v); p != nil {
		return *p, true
	}
	return "", false
}

// Path reports the file the configuration was read from ("" for defaults).
func (c Config) Path() string { return c.path }

// Load reads path on top of Default. A missing file yields the defaults
// unless mustExist is set (an explicit --config that does not exist is a
// mistake worth reporting).
func Load(path string, mustExist bool) (Config, error) {
	return load(path, mustExist, true)
}

// load is Load, with the fast decoder (fast) or go-toml's Unmarshal alone,
// which the cold-start benchmark compares.
func load(path string, mustExist, fast bool) (Config, error) {
	c := Default()
	data, err := smallfile.Read(path, MaxFileSize)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) && !mustExist {
			return c, nil
		}
		return c, fmt.Errorf("read config: %w", err)
	}
	c.path = path
	if fast && c.decodeFast(data) {
		return c, c.Validate()
	}
	if err := c.decode(data); err != nil {
		return c, err
	}
	return c, c.Validate()
}

// decode is go-toml's strict Unmarshal, the one meaning of a config file;
// decodeFast only takes documents on which it agrees with it.
func (c *Config) decode(data []byte) error {
	dec := toml.NewDecoder(bytes.NewReader(data)).DisallowUnknownFields()
	err := dec.Decode(c)
	if err == nil {
		return nil
	}
	var strict *toml.StrictMissingError
	if errors.As(err, &strict) {
		var keys []string
		for _, e := range strict.Errors {
			keys = append(keys, strings.Join(e.Key(), "."))
		}
		return fmt.Errorf("config %s: unknown key %s: allowed keys are %s",
			c.path, strings.Join(keys, ", "), strings.Join(Keys(), ", "))
	}
	var de *toml.DecodeError
	if errors.As(err, &de) {
		row, col := de.Position()
		where := fmt.Sprintf("config %s:%d:%d", c.path, row, col)
		if key := strings.Join(de.Key(), "."); key != "" {
			where += ": key " + key
		}
		return fmt.Errorf("%s: %s", where, strings.TrimPrefix(de.Error(), "toml: "))
	}
	return fmt.Errorf("config %s: %w", c.path, err)
}

// The checks below are plain functions, not regexps: every hook start
// loads the configuration, and compiling the resource-name regexp at
// package init cost about 2 ms of it.

// isEnvName reports a valid environment variable name: [A-Za-z_][A-Za-z0-9_]*.
func isEnvName(s string) bool {
	for i, c := range s {
		if !(c == '_' || 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || i > 0 && '0' <= c && c <= '9') {
			return false
		}
	}
	return s != ""
}

// isResourceName reports an extended resource name outside kubernetes.io,
// as the kubelet accepts from a device plugin: a DNS domain of lower-case
// labels with a top-level label of two or more letters, a slash, and a
// name of at most 63 characters from [-A-Za-z0-9_.] that starts and ends
// alphanumeric.
func isResourceName(s string) bool {
	domain, name, ok := strings.Cut(s, "/")
	if !ok {
		return false
	}
	labels := strings.Split(domain, ".")
	if len(labels) < 2 {
		return false
	}
	for i, l := range labels {
		if l == "" || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for _, c := range l {
			letter := 'a' <= c && c <= 'z'
			if i == len(labels)-1 {
				if !letter {
					return false
				}
			} else if !letter && !('0' <= c && c <= '9') && c != '-' {
				return false
			}
		}
	}
	if len(labels[len(labels)-1]) < 2 || name == "" || len(name) > 63 {
		return false
	}
	alnum := func(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' }
	if !alnum(name[0]) || !alnum(name[len(name)-1]) {
		return false
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !alnum(c) && c != '-' && c != '_' && c != '.' {
			return false
		}
	}
	return true
}

// Validate reports every bad value at once, in the order of the keys table.
func (c Config) Validate() error {
	var errs []error
	for _, k := range keys {
		if k.check == nil {
			continue
		}
		for _, p := range k.check(k.field(&c)) {
			errs = append(errs, fmt.Errorf("config %s: key %s: %s", c.source(), k.path(), p))
		}
	}
	return errors.Join(errs...)
}

func (c Config) source() string {
	if c.path == "" {
		return "(defaults)"
	}
	return c.path
}
