package devcgroup

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/devnode"
)

// Environment of the fresh-process measurement, see TestFreshAllow.
const freshPidEnv = "DEVCGROUP_FRESH_PID"

// TestFreshAllow is not a test. Re-executed with freshPidEnv set, the test
// binary allows one device for that pid once, as a hook process does, and
// prints how long it took in nanoseconds and the page faults it cost.
func TestFreshAllow(t *testing.T) {
	pid, err := strconv.Atoi(os.Getenv(freshPidEnv))
	if err != nil {
		return
	}
	var before, after unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &before)
	start := time.Now()
	err = Allow(pid, specRulesOnlyNull(), devnode.Node{Major: 10, Minor: 229})
	d := time.Since(start)
	unix.Getrusage(unix.RUSAGE_SELF, &after)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Printf("%d %d\n", d.Nanoseconds(), after.Minflt-before.Minflt)
	os.Exit(0)
}

// BenchmarkAllowFresh measures Allow in a fresh process, the only way a
// hook calls it: each op re-executes the test binary for a pid in a test
// cgroup of each hierarchy of a hybrid host (the v1 devices hierarchy, and
// cgroup2 without a device program), as runc 1.1 leaves a container there. ns/op is the
// exec's; fresh-ns/op and faults/op are Allow's, medians.
func BenchmarkAllowFresh(b *testing.B) {
	requireRoot(b)
	// A hybrid host's hook finds both; this benchmark wants both too.
	v1 := testCgroup(b, hierarchyRoot(b, false))
	v2 := testCgroup(b, hierarchyRoot(b, true))
	pid := holder(b, v1)
	if err := os.WriteFile(v2+"/cgroup.procs", []byte(strconv.Itoa(pid)), 0); err != nil {
		b.Fatal(err)
	}
	var ns, faults []int64
	for b.Loop() {
		cmd := exec.Command(os.Args[0], "-test.run=^TestFreshAllow$")
		cmd.Env = append(os.Environ(), freshPidEnv+"="+strconv.Itoa(pid))
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		if err != nil {
			b.Fatal(err)
		}
		var d, f int64
		if _, err := fmt.Sscan(string(out), &d, &f); err != nil {
			b.Fatalf("child printed %q", out)
		}
		ns, faults = append(ns, d), append(faults, f)
	}
	b.ReportMetric(float64(median(ns)), "fresh-ns/op")
	b.ReportMetric(float64(median(faults)), "faults/op")
}

func median(v []int64) int64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}
