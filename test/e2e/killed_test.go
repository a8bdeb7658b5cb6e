package e2e

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// TestKilledStart: a start killed at any step of the hook's work (each
// mount, each file made, written, linked or renamed: test/stepkill kills
// the hook before the N-th such system call runs) leaves nothing that
// keeps the container from starting again. The same container, on the
// root file system the killed start left, as docker restart starts it,
// gets its GPU (/dev/dxg opens, libcuda loads without LD_LIBRARY_PATH),
// and neither start leaks anything onto the host (runBox checks). The
// restart runs the hook under stepkill too, so that it has the pid the
// killed one had, as it would in the container's fresh pid namespace.
func TestKilledStart(t *testing.T) {
	h := env(t)
	sk := need(t, "build stepkill", h.stepkill)
	under := func(at int) func(*testing.T, specs.Hook, string) specs.Hook {
		return func(t *testing.T, hk specs.Hook, dir string) specs.Hook {
			argv := []string{"stepkill", "--at", strconv.Itoa(at), "--report", filepath.Join(dir, "steps"),
				"--skip", filepath.Join(dir, "hook.log"), "--", hk.Path}
			hk.Args = append(argv, hk.Args[1:]...)
			hk.Path = sk
			return hk
		}
	}
	base := box{
		image: imageDebian, sim: &simulation{profile: "nvidia-laptop"},
		cdi:    []string{"nvidia.com/gpu=all"},
		checks: []check{{"dxg", "fsprobe open-rw /dev/dxg"}, {"cuda", "cudaprobe"}},
	}
	whole := base
	whole.wrapHooks = under(0)
	o := runBox(t, whole)
	o.started(t)
	steps, end := readSteps(t, o.dir)
	if !strings.HasPrefix(end, "exit 0 after ") || len(steps) == 0 {
		t.Fatalf("the whole start: %q after steps %q", end, steps)
	}
	t.Logf("a start's %d steps:\n%s", len(steps), strings.Join(steps, "\n"))
	for n := 1; n <= len(steps); n++ {
		t.Run(fmt.Sprintf("%02d %s", n, stepName(steps[n-1])), func(t *testing.T) {
			t.Parallel()
			b := base
			b.wrapHooks = under(n)
			killed := runBox(t, b)
			got, end := readSteps(t, killed.dir)
			if killed.exitCode == 0 || end != fmt.Sprintf("killed at step %d", n) {
				t.Fatalf("want the start killed at step %d (%s); exit %d, %q\n%s", n, steps[n-1], killed.exitCode, end, killed.debug())
			}
			at := got[n-1]
			again := base
			again.restart = killed
			again.wrapHooks = under(0)
			o := runBox(t, again)
			if o.exitCode != 0 {
				t.Fatalf("killed at %s, the container does not start again:\n%s", at, o.debug())
			}
			wantOutput(t, o, "dxg", "open-rw /dev/dxg: ok")
			wantContains(t, o, "cuda", "cuInit(0) = 0")
			for _, f := range leftovers(t, o) {
				// A kill between a file's link and its rename leaves
				// that one file, with a name nothing else uses.
				if !strings.HasPrefix(at, "renameat ") || !strings.Contains(at, f+" -> ") {
					t.Errorf("killed at %s, the restart left %s", at, f)
				}
			}
		})
	}
}

// readSteps returns the steps stepkill's report in dir lists and its last
// line (how the hook ended).
func readSteps(t *testing.T, dir string) ([]string, string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "steps"))
	if err != nil {
		t.Fatalf("stepkill's report: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	var steps []string
	for _, l := range lines[:len(lines)-1] {
		_, s, _ := strings.Cut(l, ": ")
		steps = append(steps, s)
	}
	return steps, lines[len(lines)-1]
}

// stepName shortens a step for a test name: the call and the last path's
// base name.
func stepName(step string) string {
	call, rest, _ := strings.Cut(step, " ")
	if i := strings.LastIndex(rest, " -> "); i >= 0 {
		rest = rest[i+4:]
	}
	rest, _, _ = strings.Cut(rest, " (")
	return call + " " + path.Base(rest)
}

// leftovers lists the temporary files of the hook's writes in the root
// file system and in the host directories it writes (the work dir holds
// the SONAME file, probe-cache the probe cache): names that begin with a
// dot and carry ".wsl-gpu-hook".
func leftovers(t *testing.T, o *outcome) []string {
	t.Helper()
	ours := func(name string) bool { return strings.HasPrefix(name, ".") && strings.Contains(name, ".wsl-gpu-hook") }
	var found []string
	err := filepath.WalkDir(o.rootfs, func(p string, d fs.DirEntry, err error) error {
		if err == nil && ours(d.Name()) {
			found = append(found, p)
		}
		return err
	})
	if err != nil {
		t.Fatalf("walk %s: %v", o.rootfs, err)
	}
	for _, dir := range []string{o.dir, filepath.Join(o.dir, "probe-cache")} {
		ents, err := os.ReadDir(dir)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
		for _, e := range ents {
			if ours(e.Name()) {
				found = append(found, filepath.Join(dir, e.Name()))
			}
		}
	}
	return found
}
