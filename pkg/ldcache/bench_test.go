package ldcache

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// wslNames are the names a real /usr/lib/wsl/lib and an NVIDIA driver
// store register, about what the hook merges per container.
var wslNames = []string{"libcuda.so.1", "libdxcore.so", "libd3d12.so", "libd3d12core.so", "libdirectml.so",
	"libnvidia-ml.so.1", "libnvcuvid.so.1", "libnvidia-encode.so.1", "libnvidia-opticalflow.so.1",
	"libnvoptix.so.1", "libcudadebugger.so.1", "libnvwgf2umx.so", "libnvdxdlkernels.so", "libnvcuvid.so",
	"libnvidia-encode.so", "libnvidia-opticalflow.so", "libcuda.so", "libnvidia-ptxjitcompiler.so.1",
	"libnvidia-nvvm.so.4", "libnvidia-gpucomp.so"}

// BenchmarkMerge merges 20 entries into this machine's real cache: the
// work the hook does per container start, minus reading and writing files.
func BenchmarkMerge(b *testing.B) {
	data := hostCache(b)
	add := make([]Entry, len(wslNames))
	for i, n := range wslNames {
		add[i] = Entry{Key: n, Path: "/usr/lib/wsl/lib/" + n, Flags: FlagX8664Libc6}
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Merge(data, add); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParse is the reading half of BenchmarkMerge.
func BenchmarkParse(b *testing.B) {
	data := hostCache(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(data); err != nil {
			b.Fatal(err)
		}
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
