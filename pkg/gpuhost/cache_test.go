package gpuhost

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/devnode"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/fixture"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/testbin"
)

// envProbeChild carries a probeChild's setup into the test binary re-run
// under dxgsim.
const envProbeChild = "GPUHOST_PROBE_CHILD"

type probeSetup struct{ Dev, Root, Cache string }

// probeResult is what one start's probe said.
type probeResult struct {
	Hit     bool
	Miss    string
	Folders []string
}

// TestProbeChild is the re-run under dxgsim: one start's Probe.
func TestProbeChild(t *testing.T) {
	env := os.Getenv(envProbeChild)
	if env == "" {
		t.Skip("run by TestProbeCacheUnderDxgsim")
	}
	var s probeSetup
	if err := json.Unmarshal([]byte(env), &s); err != nil {
		t.Fatal(err)
	}
	node, err := devnode.Stat(s.Dev)
	if err != nil {
		t.Fatal(err)
	}
	var r probeResult
	h, skipped, err := Probe(node, Options{LibDir: filepath.Join(s.Root, fixture.LibDir), DriversDir: filepath.Join(s.Root, fixture.DriversDir),
		Ldcache: true, ShortLived: true, CacheDir: s.Cache, Cached: func(hit bool, miss error) {
			r.Hit = hit
			if miss != nil {
				r.Miss = miss.Error()
			}
		}})
	if err != nil || len(skipped) > 0 {
		t.Fatalf("probe: %v, skipped %v", err, skipped)
	}
	for _, f := range h.Inventory.Folders {
		r.Folders = append(r.Folders, f.Name)
	}
	data, _ := json.Marshal(r)
	fmt.Printf("\nRESULT %s\n", data)
}

// TestProbeCacheUnderDxgsim: starts under the simulator answer from the
// cache without a host query once it is warm, and a driver update (a new
// folder in the driver store, which the host then names) or a corrupt
// cache file makes the next start ask the host and see the new folder.
// Root: dxgsim makes a device node and installs a seccomp listener.
func TestProbeCacheUnderDxgsim(t *testing.T) {
	if os.Getenv(envProbeChild) != "" {
		t.Skip("in the child")
	}
	if os.Geteuid() != 0 {
		t.Skip("dxgsim needs root")
	}
	dxgsim, err := testbin.Dxgsim(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	root := fixture.Host(t, "nvidia-laptop", fixture.Options{Stubs: true})
	s := probeSetup{Dev: filepath.Join(t.TempDir(), "dxg"), Root: root, Cache: filepath.Join(t.TempDir(), "cache")}
	setup, _ := json.Marshal(s)
	start := func(t *testing.T, extra ...string) (probeResult, map[string]uint64) {
		t.Helper()
		rep := filepath.Join(t.TempDir(), "report.json")
		args := append([]string{"--profile", "nvidia-laptop", "--dev", s.Dev, "--report", rep}, extra...)
		args = append(args, "--", os.Args[0], "-test.run=^TestProbeChild$", "-test.count=1")
		cmd := exec.Command(dxgsim, args...)
		cmd.Env = append(os.Environ(), envProbeChild+"="+string(setup))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("dxgsim: %v\n%s", err, out)
		}
		var r probeResult
		for _, l := range strings.Split(string(out), "\n") {
			if res, ok := strings.CutPrefix(l, "RESULT "); ok {
				if err := json.Unmarshal([]byte(res), &r); err != nil {
					t.Fatal(err)
				}
			}
		}
		var report struct{ Calls map[string]uint64 }
		data, err := os.ReadFile(rep)
		if err == nil {
			err = json.Unmarshal(data, &report)
		}
		if err != nil {
			t.Fatal(err)
		}
		return r, report.Calls
	}
	intel, nv := "iigd_dch.inf_amd64_ba2ab4a3e0e0b2ea", "nvltwi.inf_amd64_7b2a5c1c4e6f8d90"
	check := func(t *testing.T, r probeResult, calls map[string]uint64, hit bool, folders ...string) {
		t.Helper()
		if r.Hit != hit || !slices.Equal(r.Folders, folders) {
			t.Errorf("probe: hit %v (miss %q), folders %v; want hit %v, folders %v", r.Hit, r.Miss, r.Folders, hit, folders)
		}
		if q := calls["QUERYADAPTERINFO"]; (q == 0) != hit {
			t.Errorf("%d host queries with hit %v: %v", q, r.Hit, calls)
		}
	}
	r, calls := start(t)
	check(t, r, calls, false, intel, nv)
	r, calls = start(t)
	check(t, r, calls, true, intel, nv)
	if calls["ENUMADAPTERS3"] != 1 || len(calls) != 1 {
		t.Errorf("a warm start sent %v, want one ENUMADAPTERS3", calls)
	}

	// A driver update: the new folder appears in the store, the host
	// names it, the LUIDs stay (dxgsim keeps them; a real host would
	// not).
	updated := "nvltwi.inf_amd64_1111111111111111"
	if err := os.Mkdir(filepath.Join(root, fixture.DriversDir, updated), 0o755); err != nil {
		t.Fatal(err)
	}
	r, calls = start(t, "--folder", "1="+updated)
	check(t, r, calls, false, intel, updated)
	r, calls = start(t, "--folder", "1="+updated)
	check(t, r, calls, true, intel, updated)

	// A cache file cut in half is ignored and replaced.
	files, _ := filepath.Glob(filepath.Join(s.Cache, "probe-*.json"))
	if len(files) != 1 {
		t.Fatalf("cache files %v, want one", files)
	}
	data, _ := os.ReadFile(files[0])
	if err := os.WriteFile(files[0], data[:len(data)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	r, calls = start(t, "--folder", "1="+updated)
	check(t, r, calls, false, intel, updated)
	r, calls = start(t, "--folder", "1="+updated)
	check(t, r, calls, true, intel, updated)
}

