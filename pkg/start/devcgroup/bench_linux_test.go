package devcgroup

import (
	"os"
	"strconv"
	"testing"

	"github.com/opencontainers/cgroups"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/devnode"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/coldrun"
)

// pidEnv names the pid whose cgroups the cold runs allow a device in.
const pidEnv = "DEVCGROUP_FRESH_PID"

// TestMain lets BenchmarkAllowFresh re-run this binary to allow one device
// once and exit, as a hook process does.
func TestMain(m *testing.M) {
	coldrun.Main(map[string]coldrun.Func{"allow": func() (func() error, error) {
		pid, err := strconv.Atoi(os.Getenv(pidEnv))
		if err != nil {
			return nil, err
		}
		return func() error {
			return Allow(pid, specRulesOnlyNull(), devnode.Node{Major: 10, Minor: 229})
		}, nil
	}})
	os.Exit(m.Run())
}

// BenchmarkAllowFresh measures Allow in a fresh process, the only way a
// hook calls it: each op re-executes the test binary for a pid in a test
// cgroup of each hierarchy of a hybrid host (the v1 devices hierarchy, and
// cgroup2 without a device program), as runc 1.1 leaves a container there.
// ns/op is the exec's; allow-cold-us/op and allow-faults/op are Allow's,
// medians.
func BenchmarkAllowFresh(b *testing.B) {
	requireRoot(b)
	// A hybrid host's hook finds both; this benchmark wants both too.
	v1 := testCgroup(b, hierarchyRoot(b, false))
	v2 := testCgroup(b, hierarchyRoot(b, true))
	pid := holder(b, v1)
	if err := os.WriteFile(v2+"/cgroup.procs", []byte(strconv.Itoa(pid)), 0); err != nil {
		b.Fatal(err)
	}
	coldrun.Bench(b, []string{"allow"}, pidEnv+"="+strconv.Itoa(pid))
}

// BenchmarkAllowFreshV2Program measures Allow in a fresh process for a pid
// in a cgroup v2 cgroup holding runc's device program, as on a host with
// only the unified hierarchy (WSL's current layout): it loads a program
// and replaces the old one. allow-cold-us/op and allow-faults/op are
// Allow's, medians.
func BenchmarkAllowFreshV2Program(b *testing.B) {
	requireRoot(b)
	v2 := testCgroup(b, hierarchyRoot(b, true))
	if err := cgroups.DevicesSetV2(v2, &cgroups.Resources{Devices: libraryRules(append(mustSpecRules(b, specRulesOnlyNull()), runtimeDefaults()...))}); err != nil {
		b.Fatal(err)
	}
	pid := holder(b, v2)
	coldrun.Bench(b, []string{"allow"}, pidEnv+"="+strconv.Itoa(pid))
}

func mustSpecRules(tb testing.TB, spec []specs.LinuxDeviceCgroup) []rule {
	tb.Helper()
	var rules []rule
	for _, s := range spec {
		r, err := specRule(s)
		if err != nil {
			tb.Fatal(err)
		}
		rules = append(rules, r)
	}
	return rules
}
