package config

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// key is one key a config file may set. The keys table below is the one
// list of them: the fast decoder stores by it, Validate checks by it, and
// Keys and the unknown-key error list it. go-toml's Unmarshal decodes by
// Config's toml tags, and TestKeysTable holds the table to those tags and
// to the shipped config.toml, which documents every key.
type key struct {
	table string // "" at top level, else the [table] it sits in
	name  string
	// field returns a pointer to the key's field in c: a *string,
	// *[]string, *int or *bool.
	field func(c *Config) any
	// check says what is wrong with the field's value, one line per
	// problem; nil accepts any value.
	check func(v any) []string
}

// path is the key as messages name it: "name" or "table.name".
func (k key) path() string {
	if k.table == "" {
		return k.name
	}
	return k.table + "." + k.name
}

// deviceTable is the one table a config file has.
const deviceTable = "device_plugin"

// keys are the top-level keys, then [device_plugin]'s: one resource key
// per vendor of the vendor table (resourceKeys, generated from it into
// resources.go), then the plugin's own.
var keys = slices.Concat(topKeys, resourceKeys, pluginKeys)

var topKeys = []key{
	{"", "dxg_device", func(c *Config) any { return &c.DxgDevice }, cleanAbsPath},
	{"", "lib_dir", func(c *Config) any { return &c.LibDir }, cleanAbsPath},
	{"", "drivers_dir", func(c *Config) any { return &c.DriversDir }, cleanAbsPath},
	{"", "ldcache", func(c *Config) any { return &c.Ldcache }, ldcacheMethod},
	{"", "log_file", func(c *Config) any { return &c.LogFile }, func(v any) []string {
		if s := *v.(*string); s != "" && !filepath.IsAbs(s) {
			return []string{fmt.Sprintf("%q must be an absolute path, or \"\" to disable the log", s)}
		}
		return nil
	}},
	{"", "log_level", func(c *Config) any { return &c.LogLevel }, logLevel},
	{"", "log_syslog", func(c *Config) any { return &c.LogSyslog }, cleanAbsPathOrEmpty},
	{"", "request_env", func(c *Config) any { return &c.RequestEnv }, func(v any) []string {
		var bad []string
		for _, e := range *v.(*[]string) {
			if !isEnvName(e) {
				bad = append(bad, fmt.Sprintf("%q is not an environment variable name", e))
			}
		}
		return bad
	}},
	{"", "request_annotation", func(c *Config) any { return &c.RequestAnnotation }, func(v any) []string {
		if s := *v.(*string); strings.ContainsAny(s, " \t\n=") {
			return []string{fmt.Sprintf("%q is not an annotation key", s)}
		}
		return nil
	}},
	{"", "runtime", func(c *Config) any { return &c.Runtime }, func(v any) []string {
		if s := *v.(*string); s == "" || strings.ContainsAny(s, " \t\n") {
			return []string{fmt.Sprintf("%q is not a runtime name or path", s)}
		}
		return nil
	}},
	{"", "rocm_dir", func(c *Config) any { return &c.ROCmDir }, cleanAbsPath},
	{"", "dri_dir", func(c *Config) any { return &c.DRIDir }, cleanAbsPath},
	{"", "wslg_dir", func(c *Config) any { return &c.WSLgDir }, cleanAbsPath},
	{"", "probe_cache", func(c *Config) any { return &c.ProbeCache }, cleanAbsPathOrEmpty},
	{"", "soname_cache", func(c *Config) any { return &c.SonameCache }, cleanAbsPathOrEmpty},
	{"", "sysfs_dir", func(c *Config) any { return &c.SysfsDir }, cleanAbsPathOrEmpty},
}

var pluginKeys = []key{
	{deviceTable, "npu_resource", func(c *Config) any { return &c.DevicePlugin.NPUResource }, resourceName},
	{deviceTable, "replicas", func(c *Config) any { return &c.DevicePlugin.Replicas }, func(v any) []string {
		if n := *v.(*int); n < 1 || n > 64 {
			return []string{fmt.Sprintf("%d must be 1 to 64", n)}
		}
		return nil
	}},
	{deviceTable, "cdi", func(c *Config) any { return &c.DevicePlugin.CDI }, nil},
}

// Keys lists every key a config file may set at top level, tables last.
func Keys() []string {
	var out []string
	for _, k := range keys {
		if k.table == "" {
			out = append(out, k.name)
		} else if !slices.Contains(out, k.table) {
			out = append(out, k.table)
		}
	}
	return out
}

var (
	logLevels      = []string{"panic", "fatal", "error", "warn", "warning", "info", "debug", "trace"}
	ldcacheMethods = []string{LdcacheBuiltin, LdcacheNone}
)

// The checks are plain functions, not closures made by a constructor, so
// the three lists are static data: all a hook process runs to build the
// table is the one copy of them into keys.

func cleanAbsPath(v any) []string {
	if s := *v.(*string); !filepath.IsAbs(s) || filepath.Clean(s) != s {
		return []string{fmt.Sprintf("%q must be a clean absolute path", s)}
	}
	return nil
}

func cleanAbsPathOrEmpty(v any) []string {
	if s := *v.(*string); s != "" && (!filepath.IsAbs(s) || filepath.Clean(s) != s) {
		return []string{fmt.Sprintf("%q must be a clean absolute path, or \"\" to disable the cache", s)}
	}
	return nil
}

func ldcacheMethod(v any) []string {
	if s := *v.(*string); !slices.Contains(ldcacheMethods, s) {
		return []string{fmt.Sprintf("%q is not one of %s", s, strings.Join(ldcacheMethods, ", "))}
	}
	return nil
}

func logLevel(v any) []string {
	if s := *v.(*string); !slices.Contains(logLevels, strings.ToLower(s)) {
		return []string{fmt.Sprintf("%q is not one of %s", s, strings.Join(logLevels, ", "))}
	}
	return nil
}

func resourceName(v any) []string {
	if s := *v.(*string); s != "" && !isResourceName(s) {
		return []string{fmt.Sprintf("%q is not an extended resource name (domain/name, e.g. nvidia.com/gpu), or \"\" to advertise none", s)}
	}
	return nil
}
