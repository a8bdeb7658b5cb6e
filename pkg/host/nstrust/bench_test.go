package nstrust

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/smallfile"
)

// envBenchFile names the file BenchmarkReadFileChild reads.
const envBenchFile = "NSTRUST_BENCH_FILE"

// BenchmarkReadFile is a warm start's read of its probe cache (4 KiB,
// root's, three directories deep under /tmp): as root under the host rule
// (the directory lstat'ed, the file opened O_NOFOLLOW and fstat'ed), and
// from user namespaces as the container's root under this package's,
// where the namespace does not map the overflow uid (the walk alone) and
// where it does, as Kubernetes' 65536 ids do (the walk, and the owner asked
// on a thread of its own). The namespaced ones run in a child the benchmark
// starts; their lines are the child's. Root.
func BenchmarkReadFile(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("root: makes user namespaces")
	}
	base := reachableDir(b)
	dir := filepath.Join(base, "run", "wsl-gpu-hook")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	os.Chmod(filepath.Join(base, "run"), 0o755)
	file := filepath.Join(dir, "probe.bin")
	if err := os.WriteFile(file, make([]byte, 4096), 0o644); err != nil {
		b.Fatal(err)
	}
	b.Run("host rule, root", func(b *testing.B) {
		for b.Loop() {
			var st unix.Stat_t
			if err := unix.Lstat(dir, &st); err != nil {
				b.Fatal(err)
			}
			if _, err := smallfile.ReadVetted(file, 1<<20, unix.O_NOFOLLOW|unix.O_NONBLOCK, func(*unix.Stat_t) error { return nil }); err != nil {
				b.Fatal(err)
			}
		}
	})
	bin := filepath.Join(base, "nstrust.test")
	copyExe(b, os.Args[0], bin)
	for _, m := range []struct {
		name string
		size int
	}{{"user namespace, 65534 unmapped", 1000}, {"user namespace, 65534 mapped", 65536}} {
		b.Run(m.name, func(b *testing.B) {
			cmd := inNamespace(bin, m.size, envBenchFile+"="+file, "-test.run=^$", "-test.bench=^BenchmarkReadFileChild$", "-test.count=1", "-test.benchtime="+benchtime())
			out, err := cmd.CombinedOutput()
			if err != nil {
				b.Fatalf("child: %v\n%s", err, out)
			}
			for _, l := range strings.Split(string(out), "\n") {
				if strings.HasPrefix(l, "BenchmarkReadFileChild") {
					b.Logf("%s", l)
				}
			}
			b.SkipNow() // the figure is the child's
		})
	}
}

// BenchmarkReadFileChild is the loop in the namespace.
func BenchmarkReadFileChild(b *testing.B) {
	file := os.Getenv(envBenchFile)
	if file == "" {
		b.Skip("run by BenchmarkReadFile")
	}
	ns, err := Current()
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := ns.ReadFile(file, 1<<20); err != nil {
			b.Fatal(err)
		}
	}
}

// benchtime is the parent's -test.benchtime, for the child.
func benchtime() string {
	for _, a := range os.Args {
		if v, ok := strings.CutPrefix(a, "-test.benchtime="); ok {
			return v
		}
	}
	return "1s"
}
