package config

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// agree decodes data with the fast decoder and with Unmarshal, on top of
// the defaults, and fails t unless the fast decoder declined or both give
// the same Config without error. It reports whether the fast one took it.
func agree(t *testing.T, data []byte) bool {
	t.Helper()
	fast, slow := Default(), Default()
	fast.path, slow.path = "F", "F"
	took := fast.decodeFast(data)
	err := slow.decode(data)
	if !took {
		untouched := Default()
		untouched.path = "F"
		if !reflect.DeepEqual(fast, untouched) {
			t.Fatalf("declining decodeFast changed the config: %+v", fast)
		}
		return false
	}
	if err != nil {
		t.Fatalf("decodeFast took %q, Unmarshal rejects it: %v", data, err)
	}
	if !reflect.DeepEqual(fast, slow) {
		t.Fatalf("decodeFast(%q)\n = %#v\nUnmarshal gives\n   %#v", data, fast, slow)
	}
	return true
}

// edgeDocs are documents at the edge of what the fast decoder takes. take
// says whether it must take the document (the plain shapes a user writes)
// or must leave it to Unmarshal (legal TOML it does not handle, errors).
var edgeDocs = []struct {
	name, toml string
	take       bool
}{
	{"empty file", "", true},
	{"comments only", "# nothing\n\n  # here\n", true},
	{"literal and escaped strings", "dxg_device = '/tmp/a b/dxg'\nlib_dir = \"/tmp/\\u00e9\\t\\\"x\\\"\"\n", true},
	{"multi-line strings", "log_file = \"\"\"\n/var/log/x\"\"\"\nruntime = '''crun'''\n", true},
	{"CRLF and trailing comments", "ldcache = \"none\" # why\r\n[device_plugin] # t\r\nreplicas = 3\r\n", true},
	{"quoted key", "\"dxg_device\" = \"/x\"\n", true},
	{"quoted table name", "[\"device_plugin\"]\ncdi = false\n", true},
	{"multi-line array", "request_env = [\n  \"A\", # first\n  \"B\",\n]\n", true},
	{"empty string", "log_file = \"\"\nrequest_annotation = ''\n", true},
	{"empty table", "[device_plugin]\n", true},
	{"replicas 0 (Validate rejects it)", "[device_plugin]\nreplicas = 0\n", true},
	{"case-folded key", "DXG_DEVICE = \"/x\"\n", false},
	{"unknown key", "dxg_devic = \"/x\"\n", false},
	{"unknown table", "[table]\nx = 1\n", false},
	{"top-level key inside the table", "[device_plugin]\ndxg_device = \"/x\"\n", false},
	{"table key at top level", "replicas = 2\n", false},
	{"dotted key", "device_plugin.replicas = 2\n", false},
	{"inline table", "device_plugin = { replicas = 2 }\n", false},
	{"array table", "[[device_plugin]]\nreplicas = 2\n", false},
	{"duplicate key", "ldcache = \"none\"\nldcache = \"builtin\"\n", false},
	{"duplicate table", "[device_plugin]\ncdi = true\n[device_plugin]\nreplicas = 2\n", false},
	{"wrong type", "dxg_device = 1\n", false},
	{"string for an int", "[device_plugin]\nreplicas = \"2\"\n", false},
	{"int for a bool", "[device_plugin]\ncdi = 1\n", false},
	{"hex integer", "[device_plugin]\nreplicas = 0x2\n", false},
	{"signed integer", "[device_plugin]\nreplicas = +2\n", false},
	{"underscored integer", "[device_plugin]\nreplicas = 1_0\n", false},
	{"huge integer", "[device_plugin]\nreplicas = 99999999999999999999\n", false},
	{"float", "[device_plugin]\nreplicas = 2.0\n", false},
	{"empty array", "request_env = []\n", false},
	{"mixed array", "request_env = [\"A\", 2]\n", false},
	{"nested array", "request_env = [[\"A\"]]\n", false},
	{"string for an array", "request_env = \"A\"\n", false},
	{"malformed", "dxg_device = \n", false},
	{"unterminated string", "dxg_device = \"/x\n", false},
	{"date", "runtime = 1979-05-27\n", false},
}

// TestDecodeFastAgrees: on the shipped file, every TOML file in the
// repository's testdata, Load's cases and the edge documents, the fast
// decoder either declines or gives what Unmarshal gives; and it takes the
// shapes users write, or it would be dead weight.
func TestDecodeFastAgrees(t *testing.T) {
	shipped, err := os.ReadFile("config.toml")
	if err != nil {
		t.Fatal(err)
	}
	if !agree(t, shipped) {
		t.Error("decodeFast declined the shipped config.toml")
	}
	files, err := filepath.Glob("../*/*/testdata/*.toml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata files: %v", err)
	}
	more, _ := filepath.Glob("*/*.toml")
	for _, f := range append(files, more...) {
		t.Run(f, func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			agree(t, data)
		})
	}
	for _, tt := range loadCases() {
		t.Run(tt.name, func(t *testing.T) { agree(t, []byte(tt.toml)) })
	}
	for _, tt := range edgeDocs {
		t.Run(tt.name, func(t *testing.T) {
			if took := agree(t, []byte(tt.toml)); took != tt.take {
				t.Errorf("decodeFast took it: %v, want %v", took, tt.take)
			}
		})
	}
}

// TestLoadFastEqualsUnmarshal: Load with the fast decoder and with Unmarshal
// alone give the same Config and the same error, message for message.
func TestLoadFastEqualsUnmarshal(t *testing.T) {
	docs := []string{}
	for _, tt := range loadCases() {
		docs = append(docs, tt.toml)
	}
	for _, tt := range edgeDocs {
		docs = append(docs, tt.toml)
	}
	dir := t.TempDir()
	for i, doc := range docs {
		f := filepath.Join(dir, "c.toml")
		if err := os.WriteFile(f, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		fc, ferr := load(f, true, true)
		sc, serr := load(f, true, false)
		if !reflect.DeepEqual(fc, sc) || errString(ferr) != errString(serr) {
			t.Errorf("doc %d %q:\nfast %+v, %v\nslow %+v, %v", i, doc, fc, ferr, sc, serr)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// FuzzDecodeFast: for any document, the fast decoder declines or gives
// exactly Unmarshal's Config.
func FuzzDecodeFast(f *testing.F) {
	seed, _ := os.ReadFile("config.toml")
	f.Add(string(seed))
	for _, tt := range loadCases() {
		f.Add(tt.toml)
	}
	for _, tt := range edgeDocs {
		f.Add(tt.toml)
	}
	f.Fuzz(func(t *testing.T, s string) {
		agree(t, []byte(s))
	})
}

// docLines are the pieces FuzzDecodeFastLines builds documents from: every
// key in both tables, with values of each kind, spelled in the ways TOML
// allows, so that the fuzzer explores orders, repeats and misplacements
// that mutating bytes of a seed rarely reaches.
var docLines = []string{
	"[device_plugin]", "[ device_plugin ] # c", "[\"device_plugin\"]", "[[device_plugin]]", "[other]",
	"# comment", "", "device_plugin = {}", "device_plugin.cdi = true",
	"dxg_device = \"/x\"", "lib_dir = '/y'", "drivers_dir = \"\"\"/z\"\"\"", "ldcache = \"none\"",
	"log_file = \"\"", "log_level = \"debug\"", "runtime = \"crun\"", "request_annotation = \"a/b\"",
	"rocm_dir = \"/r\"", "dri_dir = \"/d\"", "wslg_dir = \"/w\"", "probe_cache = \"\"", "probe_cache = \"/p\"", "\"ldcache\" = \"builtin\"", "LDCACHE = \"none\"",
	"request_env = [\"A\"]", "request_env = [\"A\", \"B\",]", "request_env = []", "request_env = \"A\"", "request_env = [1]",
	"nvidia_resource = \"a.com/b\"", "amd_resource = \"\"", "intel_resource = 'i.com/x'", "other_resource = \"o.io/y\"", "qualcomm_resource = \"q.com/g\"",
	"replicas = 2", "replicas = 0x2", "replicas = 1_0", "replicas = -1", "replicas = 2.5", "replicas = \"2\"",
	"cdi = false", "cdi = true", "cdi = 0", "dxg_device = 1", "dxg_device = true", "dxg_device = 1979-05-27",
	"soname_cache = \"\"", "soname_cache = '/s'", "soname_cache = \"s\"",
}

// FuzzDecodeFastLines: any document made of docLines, in any order and
// number, is declined by the fast decoder or given Unmarshal's Config.
func FuzzDecodeFastLines(f *testing.F) {
	f.Add([]byte{9, 12, 22, 0, 27, 31, 37})
	f.Add([]byte{0, 31, 0, 37})
	f.Add([]byte{12, 12})
	f.Fuzz(func(t *testing.T, picks []byte) {
		var doc []byte
		for _, p := range picks {
			doc = append(doc, docLines[int(p)%len(docLines)]...)
			doc = append(doc, '\n')
		}
		agree(t, doc)
	})
}
