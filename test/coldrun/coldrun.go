package coldrun

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// env names the function a re-executed test binary runs instead of its
// tests.
const env = "WSL_GPU_COLDRUN"

// Func is one measured function. It does its setup (reading the
// environment, files, locking threads) and returns the part to time; only
// that part's duration and page faults are reported.
type Func func() (timed func() error, err error)

// Main runs the function named by the environment, if Bench started this
// process, prints its microseconds and page faults, and exits; otherwise
// it returns and TestMain goes on to m.Run.
func Main(funcs map[string]Func) {
	name, ok := os.LookupEnv(env)
	if !ok {
		return
	}
	os.Exit(run(funcs, name))
}

func run(funcs map[string]Func, name string) int {
	f, ok := funcs[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "coldrun: no measured function %q\n", name)
		return 2
	}
	timed, err := f()
	if err != nil {
		fmt.Fprintf(os.Stderr, "coldrun: %s: setup: %v\n", name, err)
		return 1
	}
	var before, after unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &before); err != nil {
		fmt.Fprintln(os.Stderr, "coldrun: getrusage:", err)
		return 1
	}
	start := time.Now()
	err = timed()
	d := time.Since(start)
	if err := unix.Getrusage(unix.RUSAGE_SELF, &after); err != nil {
		fmt.Fprintln(os.Stderr, "coldrun: getrusage:", err)
		return 1
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "coldrun: %s: %v\n", name, err)
		return 1
	}
	fmt.Println(d.Nanoseconds(), after.Minflt-before.Minflt)
	return 0
}

// Bench runs each variant (a name given to Main) in a fresh process of
// this test binary, in turn, b.N rounds, with env added to the process's
// environment, and reports each variant's median time and page faults.
// ns/op is a round's, starting the processes included.
func Bench(b *testing.B, variants []string, env ...string) {
	b.Helper()
	us := make([][]float64, len(variants))
	faults := make([][]float64, len(variants))
	for b.Loop() {
		for i, v := range variants {
			d, f := once(b, v, env)
			us[i] = append(us[i], d)
			faults[i] = append(faults[i], f)
		}
	}
	for i, v := range variants {
		b.ReportMetric(median(us[i]), v+"-cold-us/op")
		b.ReportMetric(median(faults[i]), v+"-faults/op")
	}
}

// once runs variant v in a fresh process and returns its microseconds and
// page faults.
func once(b *testing.B, v string, extra []string) (us, faults float64) {
	b.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(append(os.Environ(), extra...), env+"="+v)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		b.Fatalf("cold run of %s: %v: %s", v, err, stderr.Bytes())
	}
	var ns int64
	if n, err := fmt.Sscan(string(out), &ns, &faults); err != nil || n != 2 {
		b.Fatalf("cold run of %s printed %q, want nanoseconds and page faults", v, out)
	}
	return float64(ns) / 1e3, faults
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}
