package install

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pelletier/go-toml/v2"
)

func addSeeds(f *testing.F, pattern string) {
	files, _ := filepath.Glob(filepath.Join("testdata", pattern))
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
}

// FuzzDockerRuntime: for any daemon.json, install gives valid JSON with
// our runtime or refuses; a second install changes nothing; uninstall
// after install gives the original bytes back.
func FuzzDockerRuntime(f *testing.F) {
	addSeeds(f, "daemon-*.json")
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(bytes.TrimSpace(data)) == 0 {
			return // created from scratch: uninstall leaves {} (documented)
		}
		added, err := addDockerRuntime("f", data, wrapper)
		if err != nil {
			if _, perr := parseJSONDoc("f", data); perr == nil &&
				!strings.Contains(err.Error(), "given twice") && !strings.Contains(err.Error(), "is read as") && !strings.Contains(err.Error(), "not an object") {
				t.Fatalf("valid JSON refused: %v", err)
			}
			return
		}
		var cfg struct {
			Runtimes map[string]json.RawMessage `json:"runtimes"`
		}
		if err := json.Unmarshal(bytes.TrimPrefix(added, utf8BOM), &cfg); err != nil {
			t.Fatalf("result is not JSON: %v\n%q", err, added)
		}
		var rt struct {
			Path string `json:"path"`
		}
		if err := json.Unmarshal(cfg.Runtimes[runtimeName], &rt); err != nil || rt.Path != wrapper {
			t.Fatalf("no runtime in %q", added)
		}
		again, err := addDockerRuntime("f", added, wrapper)
		if err != nil || !bytes.Equal(again, added) {
			t.Fatalf("second install changed %q to %q (%v)", added, again, err)
		}
		removed, _, err := removeDockerRuntime("f", added, wrapper)
		if err != nil {
			t.Fatal(err)
		}
		if hadOurs, emptyRuntimes := inspectRuntimes(data); !hadOurs && !emptyRuntimes && !bytes.Equal(removed, data) {
			t.Fatalf("uninstall after install:\n%q\nwant:\n%q", removed, data)
		}
	})
}

// inspectRuntimes: whether the original already had our entry, and
// whether its runtimes object was empty (uninstall then removes it).
func inspectRuntimes(data []byte) (hadOurs, empty bool) {
	d, err := parseJSONDoc("f", data)
	if err != nil {
		return false, false
	}
	rt, ok, err := d.lookup(d.top, "runtimes", true)
	if err != nil || !ok {
		return false, false
	}
	o, err := d.runtimes(rt)
	if err != nil {
		return false, false
	}
	_, hadOurs, _ = d.lookup(o, runtimeName, false)
	return hadOurs, len(o.members) == 0
}

// FuzzContainerdBlock: for any config.toml, install appends a block to
// the untouched original and the result parses, or it refuses; install
// is idempotent and uninstall gives the original back.
func FuzzContainerdBlock(f *testing.F) {
	addSeeds(f, "containerd-*.toml")
	o := DefaultOptions()
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return // the file is created, and removed again
		}
		added, _, err := containerdConfig(data, o, false)
		if err != nil {
			return
		}
		hadBlock := lineStarting(data, blockBegin, 0) >= 0
		if !hadBlock && !bytes.HasPrefix(added, data) {
			t.Fatalf("the original changed: %q -> %q", data, added)
		}
		var cfg map[string]any
		if err := toml.Unmarshal(added, &cfg); err != nil {
			t.Fatalf("result does not parse: %v\n%q", err, added)
		}
		again, _, err := containerdConfig(added, o, false)
		if err != nil || !bytes.Equal(again, added) {
			t.Fatalf("second install changed %q to %q (%v)", added, again, err)
		}
		removed, _, err := containerdConfig(added, o, true)
		if err != nil {
			t.Fatal(err)
		}
		if !hadBlock && !bytes.Equal(removed, data) {
			t.Fatalf("uninstall after install:\n%q\nwant:\n%q", removed, data)
		}
	})
}
