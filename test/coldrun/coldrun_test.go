package coldrun

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// pages is what the "touch" function faults in: a 64-page buffer made in
// setup, written in the timed part.
const pages = 64

var funcs = map[string]Func{
	"sleep": func() (func() error, error) {
		return func() error { time.Sleep(2 * time.Millisecond); return nil }, nil
	},
	"touch": func() (func() error, error) {
		buf := make([]byte, pages*os.Getpagesize())
		return func() error {
			for i := 0; i < len(buf); i += os.Getpagesize() {
				buf[i] = 1
			}
			return nil
		}, nil
	},
	"fail": func() (func() error, error) {
		return func() error { return errors.New("broken on purpose") }, nil
	},
	"env": func() (func() error, error) {
		if os.Getenv("COLDRUN_TEST_EXTRA") != "yes" {
			return nil, errors.New("extra environment not passed")
		}
		return func() error { return nil }, nil
	},
}

func TestMain(m *testing.M) {
	Main(funcs)
	os.Exit(m.Run())
}

// TestBench: each variant gets its own medians, time is the timed part's
// and faults are the pages it first touched.
func TestBench(t *testing.T) {
	r := testing.Benchmark(func(b *testing.B) {
		Bench(b, []string{"sleep", "touch", "env"}, "COLDRUN_TEST_EXTRA=yes")
	})
	if r.N == 0 {
		t.Fatal("the benchmark failed")
	}
	if us := r.Extra["sleep-cold-us/op"]; us < 2000 || us > 200000 {
		t.Errorf("sleep-cold-us/op = %v, want the 2 ms sleep", us)
	}
	if f := r.Extra["touch-faults/op"]; f < pages/2 {
		t.Errorf("touch-faults/op = %v, want about %d: the pages written in the timed part", f, pages)
	}
	if _, ok := r.Extra["env-cold-us/op"]; !ok {
		t.Errorf("no env-cold-us/op in %v", r.Extra)
	}
}

// TestMainFails: a measured function's error, or an unknown name, is the
// re-executed binary's failure with the cause on stderr, not a time.
func TestMainFails(t *testing.T) {
	for name, want := range map[string]string{
		"fail":    "broken on purpose",
		"missing": `no measured function "missing"`,
		"env":     "extra environment not passed",
	} {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), env+"="+name)
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), want) {
			t.Errorf("%s: %v, %q; want a failure saying %q", name, err, out, want)
		}
	}
}
