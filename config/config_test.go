package config

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/pelletier/go-toml/v2"
)

// The shipped file documents the defaults; it must never drift from Default.
func TestShippedFileEqualsDefault(t *testing.T) {
	c, err := Load("config.toml", true)
	if err != nil {
		t.Fatal(err)
	}
	c.path = ""
	if !reflect.DeepEqual(c, Default()) {
		t.Fatalf("config.toml = %+v\nDefault()   = %+v", c, Default())
	}
}

func TestMissingFile(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope.toml")
	c, err := Load(missing, false)
	if err != nil || !reflect.DeepEqual(c, Default()) {
		t.Fatalf("Load(missing) = %+v, %v; want defaults", c, err)
	}
	if _, err := Load(missing, true); err == nil {
		t.Fatal("Load(missing, mustExist) succeeded")
	}
}

// loadCase is one file for Load: the values it sets on top of the
// defaults, or the one error it gives.
type loadCase struct {
	name    string
	toml    string
	want    func(*Config)
	wantErr string
}

// loadCases are shared with TestDecodeFastAgrees, which holds the fast
// decoder to Unmarshal's answer on each.
func loadCases() []loadCase {
	return []loadCase{
		{
			name: "override some keys",
			toml: "dxg_device = \"/tmp/sim/dev/dxg\"\nldcache = \"none\"\nrequest_env = [\"GPU\"]\n",
			want: func(c *Config) { c.DxgDevice = "/tmp/sim/dev/dxg"; c.Ldcache = "none"; c.RequestEnv = []string{"GPU"} },
		},
		{
			name:    "unknown key",
			toml:    "dxg_devic = \"/dev/dxg\"\n",
			wantErr: "config F: unknown key dxg_devic: allowed keys are dxg_device, lib_dir, drivers_dir, ldcache, log_file, log_level, log_syslog, request_env, request_annotation, runtime, rocm_dir, dri_dir, wslg_dir, probe_cache, soname_cache, sysfs_dir, device_plugin",
		},
		{
			name:    "bad ldcache",
			toml:    "ldcache = \"ldconfig\"\n",
			wantErr: "config F: key ldcache: \"ldconfig\" is not one of builtin, none",
		},
		{
			name:    "relative path",
			toml:    "lib_dir = \"usr/lib/wsl/lib\"\n",
			wantErr: "config F: key lib_dir: \"usr/lib/wsl/lib\" must be a clean absolute path",
		},
		{
			name: "device plugin table",
			toml: "[device_plugin]\nnvidia_resource = \"example.com/cuda\"\nintel_resource = \"\"\nqualcomm_resource = \"gpu.example.com/adreno\"\nreplicas = 4\ncdi = false\n",
			want: func(c *Config) {
				c.DevicePlugin.NVIDIAResource, c.DevicePlugin.IntelResource = "example.com/cuda", ""
				c.DevicePlugin.QualcommResource = "gpu.example.com/adreno"
				c.DevicePlugin.Replicas, c.DevicePlugin.CDI = 4, false
			},
		},
		{
			name:    "bad device plugin values",
			toml:    "[device_plugin]\namd_resource = \"gpu\"\nreplicas = 0\n",
			wantErr: "config F: key device_plugin.amd_resource: \"gpu\" is not an extended resource name (domain/name, e.g. nvidia.com/gpu), or \"\" to advertise none\nconfig F: key device_plugin.replicas: 0 must be 1 to 64",
		},
		{
			name:    "every problem at once",
			toml:    "log_level = \"loud\"\nrequest_env = [\"A B\"]\n",
			wantErr: "config F: key log_level: \"loud\" is not one of panic, fatal, error, warn, warning, info, debug, trace\nconfig F: key request_env: \"A B\" is not an environment variable name",
		},
		{
			name:    "wrong type",
			toml:    "request_env = \"NVIDIA_VISIBLE_DEVICES\"\n",
			wantErr: "config F:1:15: key request_env: cannot decode TOML string into struct field config.Config.RequestEnv of type []string",
		},
		{
			name:    "malformed",
			toml:    "dxg_device = \n",
			wantErr: "config F:1:14: unexpected character U+000A at start of value",
		},
	}
}

func TestLoad(t *testing.T) {
	for _, tt := range loadCases() {
		t.Run(tt.name, func(t *testing.T) {
			f := filepath.Join(t.TempDir(), "config.toml")
			if err := os.WriteFile(f, []byte(tt.toml), 0o644); err != nil {
				t.Fatal(err)
			}
			c, err := Load(f, true)
			if tt.wantErr != "" {
				want := replaceF(tt.wantErr, f)
				if err == nil || err.Error() != want {
					t.Fatalf("error = %v\nwant    %s", err, want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := Default()
			want.path = f
			tt.want(&want)
			if !reflect.DeepEqual(c, want) {
				t.Fatalf("got %+v\nwant %+v", c, want)
			}
		})
	}
}

func replaceF(s, f string) string {
	out := ""
	for i := 0; i < len(s); i++ {
		if s[i] == 'F' && i > 0 && s[i-1] == ' ' && i+1 < len(s) && (s[i+1] == ':') {
			out += f
			continue
		}
		out += string(s[i])
	}
	return out
}

// FuzzLoad: any file content either loads into a valid configuration or
// gives an error that names the file; it never panics.
func FuzzLoad(f *testing.F) {
	seed, _ := os.ReadFile("config.toml")
	f.Add(string(seed))
	f.Add("dxg_device = 1\n")
	f.Add("[table]\nx = 1\n")
	f.Add("request_env = [\"A\", 2]\n")
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, s string) {
		p := filepath.Join(dir, "c.toml")
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		c, err := Load(p, true)
		if err != nil {
			if !strings.Contains(err.Error(), p) {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		if verr := c.Validate(); verr != nil {
			t.Fatalf("Load accepted an invalid config: %v", verr)
		}
	})
}

func TestFind(t *testing.T) {
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == Env {
				return v
			}
			return ""
		}
	}
	tests := []struct {
		name, flag, env, want string
		mustExist             bool
	}{
		{name: "flag wins", flag: "/f.toml", env: "/e.toml", want: "/f.toml", mustExist: true},
		{name: "then the environment", env: "/e.toml", want: "/e.toml", mustExist: true},
		{name: "then the default, which may be missing", want: DefaultPath},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, must := Find(tt.flag, env(tt.env))
			if got != tt.want || must != tt.mustExist {
				t.Fatalf("Find = %q %v, want %q %v", got, must, tt.want, tt.mustExist)
			}
		})
	}
}

// TestNameChecks pins the hand-written checks to the patterns they replace
// (compiled here, in the test, not at every hook start).
func TestNameChecks(t *testing.T) {
	env := regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	res := regexp.MustCompile(`^([a-z0-9]([-a-z0-9]*[a-z0-9])?\.)+[a-z]{2,}/[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`)
	for _, s := range []string{
		"", "A", "_", "a1", "1a", "WSL_GPU_DEVICES", "a-b", "a b", "é",
		"nvidia.com/gpu", "amd.com/gpu", "gpu.intel.com/dxg", "wsl-gpu-hook.dev/dxg", "a.b/c",
		"com/gpu", "nvidia.c/gpu", "nvidia.c0m/gpu", "-a.com/gpu", "a-.com/gpu", "a..com/gpu", "A.com/gpu",
		"a.com/", "a.com/-x", "a.com/x-", "a.com/x.y_z-1", "a.com/" + strings.Repeat("x", 63), "a.com/" + strings.Repeat("x", 64),
		"a.com/x/y", "a_b.com/x", "nvidia.com/gpu ", "1.2.com/x", "a.co-m/x",
	} {
		if got, want := isEnvName(s), env.MatchString(s); got != want {
			t.Errorf("isEnvName(%q) = %v, the pattern says %v", s, got, want)
		}
		if got, want := isResourceName(s), res.MatchString(s); got != want {
			t.Errorf("isResourceName(%q) = %v, the pattern says %v", s, got, want)
		}
	}
}

// TestKeysTable holds the keys table to what else names the keys: Config's
// toml tags, which go-toml's Unmarshal decodes by, and the shipped
// config.toml, which documents every key at its default. Each key's field
// is the field its tag names, and each check takes its field's default.
func TestKeysTable(t *testing.T) {
	var c Config
	tagged := map[string]any{} // key path -> pointer to the field
	var walk func(prefix string, v reflect.Value)
	walk = func(prefix string, v reflect.Value) {
		for i := 0; i < v.NumField(); i++ {
			tag := v.Type().Field(i).Tag.Get("toml")
			if v.Type().Field(i).Anonymous && tag == "" {
				// go-toml takes an embedded struct's fields as its
				// parent's, as encoding/json does.
				walk(prefix, v.Field(i))
				continue
			}
			if tag == "" {
				continue
			}
			if f := v.Field(i); f.Kind() == reflect.Struct {
				walk(prefix+tag+".", f)
			} else {
				tagged[prefix+tag] = f.Addr().Interface()
			}
		}
	}
	walk("", reflect.ValueOf(&c).Elem())

	var shipped map[string]any
	data, err := os.ReadFile("config.toml")
	if err != nil {
		t.Fatal(err)
	}
	if err := toml.Unmarshal(data, &shipped); err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for k, v := range shipped {
		if table, ok := v.(map[string]any); ok {
			for tk := range table {
				documented[k+"."+tk] = true
			}
		} else {
			documented[k] = true
		}
	}

	if len(keys) > 64 {
		t.Errorf("%d keys: the fast decoder's bit set holds 64", len(keys))
	}
	def := Default()
	seen := map[string]bool{}
	for _, k := range keys {
		p := k.path()
		if seen[p] {
			t.Errorf("key %s listed twice", p)
		}
		seen[p] = true
		if ptr, ok := tagged[p]; !ok {
			t.Errorf("key %s has no field with that toml tag", p)
		} else if ptr != k.field(&c) {
			t.Errorf("key %s: field is not the one tagged %s", p, p)
		}
		if !documented[p] {
			t.Errorf("key %s is not in the shipped config.toml", p)
		}
		if k.check != nil {
			if bad := k.check(k.field(&def)); bad != nil {
				t.Errorf("key %s: the default fails its check: %v", p, bad)
			}
		}
	}
	for p := range tagged {
		if !seen[p] {
			t.Errorf("field tagged %s is not in the keys table", p)
		}
	}
	for p := range documented {
		if !seen[p] {
			t.Errorf("config.toml documents %s, which is not in the keys table", p)
		}
	}
}
