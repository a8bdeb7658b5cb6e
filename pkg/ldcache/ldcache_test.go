package ldcache

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestLibcmp(t *testing.T) {
	tests := []struct {
		a, b string
		want int // sign
	}{
		{"libfoo.so.10", "libfoo.so.2", 1},
		{"libfoo.so.2", "libfoo.so.10", -1},
		{"libfoo.so.1", "libfoo.so.1", 0},
		{"libfoo.so.1", "libfoo.so", 1},
		{"libfoo.so", "libfoo.so.1", -1},
		{"libz.so.1", "libzstd.so.1", -1},
		{"lib2.so", "libx.so", 1}, // a digit sorts after a letter
		{"libcuda.so.1", "libcuda.so.1.1", -1},
		{"", "", 0},
		{"", "a", -1},
	}
	for _, tt := range tests {
		got := Libcmp(tt.a, tt.b)
		if (got > 0) != (tt.want > 0) || (got < 0) != (tt.want < 0) {
			t.Errorf("Libcmp(%q, %q) = %d, want sign %d", tt.a, tt.b, got, tt.want)
		}
	}
}

func hostCache(t testing.TB) []byte {
	t.Helper()
	data, err := os.ReadFile("/etc/ld.so.cache")
	if err != nil {
		t.Skipf("no host loader cache: %v", err)
	}
	return data
}

func TestParseHostCache(t *testing.T) {
	entries, err := Parse(hostCache(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Key == "libc.so.6" && strings.HasSuffix(e.Path, "/libc.so.6") && e.Flags == FlagX8664Libc6 {
			return
		}
	}
	t.Fatalf("libc.so.6 not among %d entries", len(entries))
}

// ldconfigList is what `ldconfig -p -C file` prints, without the lines
// that name the file or the generator.
func ldconfigList(t *testing.T, cache string) string {
	t.Helper()
	out, err := exec.Command("ldconfig", "-p", "-C", cache).CombinedOutput()
	if err != nil {
		t.Fatalf("ldconfig -p -C %s: %v\n%s", cache, err, out)
	}
	var keep []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "\t") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

// glibc's own reader must see our cache exactly as ldconfig's, in the same
// order: the order is what its binary search relies on.
func TestEncodeReadByGlibc(t *testing.T) {
	if _, err := exec.LookPath("ldconfig"); err != nil {
		t.Skip("ldconfig not installed")
	}
	data := hostCache(t)
	entries, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	// Shuffle: Encode must restore ldconfig's order by itself.
	for i := range entries {
		j := (i * 7919) % len(entries)
		entries[i], entries[j] = entries[j], entries[i]
	}
	ours := filepath.Join(t.TempDir(), "ld.so.cache")
	if err := os.WriteFile(ours, Encode(entries), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, want := ldconfigList(t, ours), ldconfigList(t, "/etc/ld.so.cache"); got != want {
		t.Fatalf("glibc reads our cache differently:\n%s\n---- want\n%s", got, want)
	}
}

// gccLib builds a tiny shared object with the given SONAME.
func gccLib(t *testing.T, dir, file, soname string) {
	t.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("gcc not installed")
	}
	src := filepath.Join(t.TempDir(), "lib.c")
	if err := os.WriteFile(src, []byte("int wslprobe(void) { return 42; }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"-shared", "-fPIC", "-o", filepath.Join(dir, file), src}
	if soname != "" {
		args = append(args, "-Wl,-soname,"+soname)
	}
	if out, err := exec.Command("gcc", args...).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
}

func TestScanDir(t *testing.T) {
	dir := t.TempDir()
	gccLib(t, dir, "libcuda.so.1.1", "libcuda.so.1")
	for _, copyName := range []string{"libcuda.so", "libcuda.so.1"} {
		data, err := os.ReadFile(filepath.Join(dir, "libcuda.so.1.1"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, copyName), data, 0o555); err != nil {
			t.Fatal(err)
		}
	}
	gccLib(t, dir, "libdxcore.so", "")
	gccLib(t, dir, "libnvidia-ml.so.1", "libnvidia-ml.so.1")
	os.WriteFile(filepath.Join(dir, "nvidia-smi"), []byte("\x7fELF not a lib"), 0o755)
	os.WriteFile(filepath.Join(dir, "libbroken.so"), []byte("garbage"), 0o644)

	entries, err := ScanDir(dir, "/usr/lib/wsl/lib")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Key+" => "+e.Path)
	}
	want := []string{
		"libcuda.so.1 => /usr/lib/wsl/lib/libcuda.so.1",
		"libdxcore.so => /usr/lib/wsl/lib/libdxcore.so",
		"libnvidia-ml.so.1 => /usr/lib/wsl/lib/libnvidia-ml.so.1",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("ScanDir:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestMerge(t *testing.T) {
	image := Encode([]Entry{
		{Key: "libc.so.6", Path: "/lib/x86_64-linux-gnu/libc.so.6", Flags: FlagX8664Libc6},
		{Key: "libcuda.so.1", Path: "/usr/lib/stub/libcuda.so.1", Flags: FlagX8664Libc6},
		{Key: "libvariant.so.1", Path: "/usr/lib/glibc-hwcaps/x86-64-v3/libvariant.so.1", Flags: FlagX8664Libc6, HWCap: hwcapExtension | 1},
	})
	out, err := Merge(image, []Entry{{Key: "libcuda.so.1", Path: "/usr/lib/wsl/lib/libcuda.so.1", Flags: FlagX8664Libc6}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := Parse(out)
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, e := range got {
		rows = append(rows, e.Key+" => "+e.Path)
	}
	want := "libcuda.so.1 => /usr/lib/wsl/lib/libcuda.so.1\nlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6"
	if strings.Join(rows, "\n") != want {
		t.Fatalf("merged:\n%s\nwant\n%s", strings.Join(rows, "\n"), want)
	}
	// Merging twice is the same as once (a restarted container).
	again, err := Merge(out, []Entry{{Key: "libcuda.so.1", Path: "/usr/lib/wsl/lib/libcuda.so.1", Flags: FlagX8664Libc6}})
	if err != nil || !bytes.Equal(again, out) {
		t.Fatalf("second merge differs: %v", err)
	}
	if _, err := Merge([]byte("#!/bin/sh\n"), nil); err == nil {
		t.Fatal("Merge accepted a file that is not a cache")
	}
	if fresh, err := Merge(nil, []Entry{{Key: "libdxcore.so", Path: "/usr/lib/wsl/lib/libdxcore.so", Flags: FlagX8664Libc6}}); err != nil || len(fresh) == 0 {
		t.Fatalf("Merge into an image without a cache: %v", err)
	}
}

// The test that matters: the real dynamic loader finds a library through a
// merged cache, with no LD_LIBRARY_PATH, and still finds the system's own.
func TestLoaderUsesMergedCache(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: binds a cache over /etc/ld.so.cache in a private mount namespace")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("unshare (util-linux) not installed")
	}
	dir := t.TempDir()
	libdir := filepath.Join(dir, "wsl")
	os.Mkdir(libdir, 0o755)
	gccLib(t, libdir, "libwslprobe.so.1", "libwslprobe.so.1")
	probe := filepath.Join(dir, "probe")
	src := filepath.Join(dir, "probe.c")
	os.WriteFile(src, []byte(`#include <dlfcn.h>
#include <stdio.h>
int main(int c, char **v) { for (int i = 1; i < c; i++) { if (!dlopen(v[i], RTLD_NOW)) { printf("%s\n", dlerror()); return 1; } } puts("ok"); return 0; }
`), 0o644)
	if out, err := exec.Command("gcc", "-o", probe, src, "-ldl").CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	entries, err := ScanDir(libdir, libdir)
	if err != nil {
		t.Fatal(err)
	}
	merged, err := Merge(hostCache(t), entries)
	if err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(dir, "ld.so.cache")
	os.WriteFile(cache, merged, 0o644)

	run := func(cacheFile string) (string, error) {
		cmd := exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-c",
			`mount --bind "$1" /etc/ld.so.cache && exec "$2" libwslprobe.so.1 libm.so.6`, "sh", cacheFile, probe)
		cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := run(cache); err != nil || strings.TrimSpace(out) != "ok" {
		t.Fatalf("with the merged cache: %v: %s", err, out)
	}
	if out, err := run("/etc/ld.so.cache"); err == nil {
		t.Fatalf("the probe library loads without our entry (test proves nothing): %s", out)
	}
}

func FuzzParse(f *testing.F) {
	f.Add(Encode([]Entry{{Key: "libc.so.6", Path: "/lib/libc.so.6", Flags: FlagX8664Libc6}}))
	f.Add([]byte(magicOld + "\x00\x00\x00\x00\x00"))
	f.Add([]byte(magicNew))
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, err := Parse(data)
		if err != nil {
			return
		}
		// Whatever parses must survive a round trip.
		back, err := Parse(Encode(entries))
		if err != nil {
			t.Fatalf("re-parse of our own encoding: %v", err)
		}
		if len(back) > len(entries) {
			t.Fatalf("round trip grew %d -> %d", len(entries), len(back))
		}
	})
}

func BenchmarkMerge(b *testing.B) {
	data := hostCache(b)
	var add []Entry
	for _, n := range []string{"libcuda.so.1", "libdxcore.so", "libd3d12.so", "libd3d12core.so", "libdirectml.so", "libnvidia-ml.so.1",
		"libnvcuvid.so.1", "libnvidia-encode.so.1", "libnvidia-opticalflow.so.1", "libnvoptix.so.1", "libcudadebugger.so.1",
		"libnvwgf2umx.so", "libnvdxdlkernels.so", "libnvcuvid.so", "libnvidia-encode.so", "libnvidia-opticalflow.so",
		"libcuda.so", "libd3d12core.so.1", "libdxg.so", "libxx.so"} {
		add = append(add, Entry{Key: n, Path: "/usr/lib/wsl/lib/" + n, Flags: FlagX8664Libc6})
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Merge(data, add); err != nil {
			b.Fatal(err)
		}
	}
}
