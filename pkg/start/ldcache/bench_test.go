package ldcache

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/coldrun"
)

// TestMain lets BenchmarkColdMerge re-run this binary to merge once and
// exit: the hook merges once per process, where every page the merge
// touches is a fresh page fault.
func TestMain(m *testing.M) {
	coldrun.Main(map[string]coldrun.Func{"new": coldMerge("new"), "ref": coldMerge("ref")})
	os.Exit(m.Run())
}

// merges are the implementations the benchmarks compare: Merge and the
// reference copy of the one before it.
var merges = map[string]func([]byte, []Entry) ([]byte, error){"new": Merge, "ref": refMerge}

// coldMerge merges wslNames into /etc/ld.so.cache with the named
// implementation.
func coldMerge(impl string) coldrun.Func {
	return func() (func() error, error) {
		data, err := os.ReadFile("/etc/ld.so.cache")
		if err != nil {
			return nil, err
		}
		add := wslAdd()
		return func() error {
			_, err := merges[impl](data, add)
			return err
		}, nil
	}
}

// BenchmarkColdMerge: one Merge in a fresh process, as in each hook run,
// new against the reference, alternating run by run. The metrics
// <impl>-cold-us/op and <impl>-faults/op are medians of the runs' own
// measurements; ns/op includes starting the processes.
func BenchmarkColdMerge(b *testing.B) {
	hostCache(b)
	coldrun.Bench(b, []string{"new", "ref"})
}

// wslNames are the names a real /usr/lib/wsl/lib and an NVIDIA driver
// store register, about what the hook merges per container.
var wslNames = []string{"libcuda.so.1", "libdxcore.so", "libd3d12.so", "libd3d12core.so", "libdirectml.so",
	"libnvidia-ml.so.1", "libnvcuvid.so.1", "libnvidia-encode.so.1", "libnvidia-opticalflow.so.1",
	"libnvoptix.so.1", "libcudadebugger.so.1", "libnvwgf2umx.so", "libnvdxdlkernels.so", "libnvcuvid.so",
	"libnvidia-encode.so", "libnvidia-opticalflow.so", "libcuda.so", "libnvidia-ptxjitcompiler.so.1",
	"libnvidia-nvvm.so.4", "libnvidia-gpucomp.so"}

// BenchmarkMerge merges 20 entries into this machine's real cache: the
// work the hook does per container start, minus reading and writing files.
// The ref sub-benchmark is the implementation before Merge worked in place.
func BenchmarkMerge(b *testing.B) {
	data := hostCache(b)
	add := wslAdd()
	for _, impl := range []string{"new", "ref"} {
		b.Run(impl, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := merges[impl](data, add); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkScanDir scans a WSL-like directory of about 25 files, one of
// them extended to 48 MB like the largest real one (sparse: ScanDir reads
// a few KB of it either way).
func BenchmarkScanDir(b *testing.B) {
	root := b.TempDir()
	dir := filepath.Join(root, wslDir(b, root))
	if err := os.Truncate(filepath.Join(dir, "libd3d12core.so"), 48<<20); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ScanDir(dir, "/usr/lib/wsl/lib"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkScanDirLarge scans 20 libraries shaped like WSL's large ones
// (libcuda, libd3d12core): 1.1 MB, 800 exported symbols, so the dynamic
// segment and the SONAME lie beyond the first read and each file takes
// three reads.
func BenchmarkScanDirLarge(b *testing.B) {
	needTool(b, "gcc")
	tmp := b.TempDir()
	var src strings.Builder
	src.WriteString("const char wslpad[1 << 20] = {1};\n")
	for i := range 800 {
		fmt.Fprintf(&src, "int wslf%d(void) { return %d; }\n", i, i)
	}
	writeFile(b, filepath.Join(tmp, "big.c"), []byte(src.String()))
	big := filepath.Join(tmp, "big.so")
	if out, err := exec.Command("gcc", "-shared", "-fPIC", "-o", big, filepath.Join(tmp, "big.c"), "-Wl,-soname,"+sonamePlaceholder).CombinedOutput(); err != nil {
		b.Fatalf("gcc: %v\n%s", err, out)
	}
	lib := readFile(b, big)
	dir := filepath.Join(tmp, "lib")
	for _, n := range wslNames {
		padded := n + strings.Repeat("\x00", len(sonamePlaceholder)-len(n))
		writeFile(b, filepath.Join(dir, n), bytes.Replace(lib, []byte(sonamePlaceholder), []byte(padded), 1))
	}
	b.ReportAllocs()
	for b.Loop() {
		if e, err := ScanDir(dir, "/usr/lib/wsl/lib"); err != nil || len(e) != len(wslNames) {
			b.Fatal(e, err)
		}
	}
}
