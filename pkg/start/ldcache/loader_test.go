package ldcache

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// probeSource dlopens each argument and prints, per name, the file the
// loader opened and what its wslprobe() returns (-1 when it has none).
const probeSource = `#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
int main(int argc, char **argv) {
	int bad = 0;
	for (int i = 1; i < argc; i++) {
		void *h = dlopen(argv[i], RTLD_LAZY);
		if (!h) {
			printf("%s\tFAIL\t%s\n", argv[i], dlerror());
			bad = 1;
			continue;
		}
		struct link_map *lm = NULL;
		dlinfo(h, RTLD_DI_LINKMAP, &lm);
		int (*f)(void) = (int (*)(void))dlsym(h, "wslprobe");
		printf("%s\t%s\t%d\n", argv[i], lm->l_name, f ? f() : -1);
	}
	return bad;
}
`

type loaded struct {
	path string // "FAIL" when dlopen failed
	ret  int    // wslprobe() result, -1 without one
}

// probe compiles the dlopen probe into a temporary directory.
func probe(t *testing.T) string {
	t.Helper()
	needRoot(t)
	needTool(t, "gcc")
	needTool(t, "unshare")
	dir := t.TempDir()
	src := filepath.Join(dir, "probe.c")
	writeFile(t, src, []byte(probeSource))
	bin := filepath.Join(dir, "probe")
	if out, err := exec.Command("gcc", "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc probe: %v\n%s", err, out)
	}
	return bin
}

// dlopenWith runs the probe with cache bound over /etc/ld.so.cache in a
// private mount namespace, so the host's cache is never touched. An empty
// cache runs it against the host's cache as it is.
func dlopenWith(t *testing.T, cache, probe string, names ...string) map[string]loaded {
	t.Helper()
	script := `exec "$0" "$@"`
	args := []string{"--mount", "--propagation", "private", "sh", "-c"}
	if cache != "" {
		script = `mount --bind "$CACHE" /etc/ld.so.cache && ` + script
	}
	cmd := exec.Command("unshare", append(append(args, script, probe), names...)...)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "CACHE=" + cache} // no LD_LIBRARY_PATH
	out, err := cmd.Output()
	var exit *exec.ExitError
	if err != nil && (!errors.As(err, &exit) || len(out) == 0) {
		t.Fatalf("%s: %v", cmd, err)
	}
	got := map[string]loaded{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.SplitN(l, "\t", 3)
		if len(f) != 3 {
			t.Fatalf("probe printed %q (exit %v)", l, err)
		}
		r := loaded{path: f[1], ret: -1}
		if f[1] != "FAIL" {
			r.ret, _ = strconv.Atoi(f[2])
		}
		got[f[0]] = r
	}
	return got
}

// The test that matters: the real loader finds a library through a cache
// merged into this machine's, with no LD_LIBRARY_PATH, not without the
// entry, and still finds the system's own libraries.
func TestLoaderUsesMergedCache(t *testing.T) {
	bin := probe(t)
	dir := t.TempDir()
	wsl := filepath.Join(dir, "wsl")
	if err := os.Mkdir(wsl, 0o755); err != nil {
		t.Fatal(err)
	}
	buildLib(t, wsl, "libwslprobe.so.1.1", "libwslprobe.so.1", 42)
	host := hostCache(t)
	hostEntries, err := refParse(host)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(hostEntries, func(e Entry) bool { return e.Key == "libm.so.6" })
	if i < 0 {
		t.Skip("libm.so.6 is not in this machine's cache")
	}
	entries, err := ScanDir(wsl, wsl)
	if err != nil {
		t.Fatal(err)
	}
	merged, err := Merge(host, entries)
	if err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(dir, "ld.so.cache")
	writeFile(t, cache, merged)

	got := dlopenWith(t, cache, bin, "libwslprobe.so.1", "libm.so.6")
	want := map[string]loaded{
		"libwslprobe.so.1": {filepath.Join(wsl, "libwslprobe.so.1.1"), 42},
		"libm.so.6":        {hostEntries[i].Path, -1},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("with the merged cache: %v, want %v", got, want)
	}
	if got := dlopenWith(t, "", bin, "libwslprobe.so.1"); got["libwslprobe.so.1"].path != "FAIL" {
		t.Fatalf("the probe library loads without our entry, so this test proves nothing: %v", got)
	}
}

// Every name in a cache we encode is found by the loader's binary search:
// names shaped like this machine's ~500 (libfoo.so.6 becomes
// libwslfoo.so.6, which orders exactly alike but exists nowhere, so a miss
// cannot load a real library) plus the ones that stress _dl_cache_libcmp,
// each mapped to a stub of its own. Stored in ascending order instead, the
// same cache makes lookups miss, so the test can fail.
func TestLoaderFindsEveryKey(t *testing.T) {
	bin := probe(t)
	hostEntries, err := refParse(hostCache(t))
	if err != nil {
		t.Fatal(err)
	}
	keys := []string{"libwslprobe.so.3000000000", "libwslé.so.1", "libwslprobe.so.10", "libwslprobe.so.2", "libwsl2probe.so"}
	keep := map[string]string{} // the probe's own libraries keep their files
	for _, e := range hostEntries {
		switch {
		case e.Flags != FlagX8664Libc6 || e.HWCap != 0:
		case e.Key == "libc.so.6" || strings.HasPrefix(e.Key, "ld-linux"):
			keep[e.Key] = e.Path
		case strings.HasPrefix(e.Key, "lib"):
			if k := "libwsl" + strings.TrimPrefix(e.Key, "lib"); !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	dir := t.TempDir()
	buildLib(t, dir, "stub.so", "", 7)
	stub := readFile(t, filepath.Join(dir, "stub.so"))
	var entries []Entry
	want := map[string]loaded{}
	for i, k := range keys {
		p := filepath.Join(dir, fmt.Sprintf("stub%d.so", i))
		writeFile(t, p, stub)
		entries = append(entries, Entry{Key: k, Path: p, Flags: FlagX8664Libc6})
		want[k] = loaded{p, 7}
	}
	for k, p := range keep {
		entries = append(entries, Entry{Key: k, Path: p, Flags: FlagX8664Libc6})
	}
	data, err := Merge(nil, entries)
	if err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(dir, "ld.so.cache")
	writeFile(t, cache, data)
	got := dlopenWith(t, cache, bin, keys...)
	for _, k := range keys {
		if got[k] != want[k] {
			t.Errorf("dlopen(%q): %+v, want %+v", k, got[k], want[k])
		}
	}

	order := make([]int32, len(entries))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(i, j int32) int { return -compare(&entries[i], &entries[j]) })
	wrong, err := refLayout(entries, order)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, cache, wrong)
	got = dlopenWith(t, cache, bin, keys...)
	misses := 0
	for _, k := range keys {
		if got[k] != want[k] {
			misses++
		}
	}
	if misses == 0 {
		t.Fatal("a cache in ascending order worked too: the loader does not rely on order, so the test above proves little")
	}
	t.Logf("%d names; in ascending order %d of them miss", len(keys), misses)
}

// An image's glibc-hwcaps entries survive the merge: the loader still
// picks the best variant for this CPU, as with ldconfig's own cache.
func TestLoaderKeepsGlibcHWCaps(t *testing.T) {
	bin := probe(t)
	help, err := exec.Command("/lib64/ld-linux-x86-64.so.2", "--help").Output()
	if err != nil {
		t.Skipf("ld.so --help: %v", err)
	}
	best := 0
	for _, level := range []int{3, 2} {
		if strings.Contains(string(help), fmt.Sprintf("x86-64-v%d (supported, searched)", level)) {
			best = level
			break
		}
	}
	if best == 0 {
		t.Skip("this CPU supports neither x86-64-v2 nor x86-64-v3")
	}
	// ldconfig -r records paths as seen inside the root; mirroring the
	// directory under the root makes them the real host paths, and keeps
	// ldconfig's auxiliary cache inside the root too.
	dir := t.TempDir()
	hw := filepath.Join(dir, "hw")
	root := filepath.Join(dir, "root")
	for _, d := range []string{hw, filepath.Join(root, hw)} {
		for level, sub := range map[int]string{1: "", 2: "glibc-hwcaps/x86-64-v2", 3: "glibc-hwcaps/x86-64-v3"} {
			if err := os.MkdirAll(filepath.Join(d, sub), 0o755); err != nil {
				t.Fatal(err)
			}
			buildLib(t, filepath.Join(d, sub), "libwslhw.so.1", "libwslhw.so.1", level)
		}
	}
	image, _ := ldconfigRoot(t, root, hw, "new")
	wsl := filepath.Join(dir, "wsl")
	if err := os.Mkdir(wsl, 0o755); err != nil {
		t.Fatal(err)
	}
	buildLib(t, wsl, "libwslprobe.so.1", "libwslprobe.so.1", 42)
	merged, err := Merge(image, []Entry{{Key: "libwslprobe.so.1", Path: filepath.Join(wsl, "libwslprobe.so.1"), Flags: FlagX8664Libc6}})
	if err != nil {
		t.Fatal(err)
	}
	variant := filepath.Join(hw, fmt.Sprintf("glibc-hwcaps/x86-64-v%d/libwslhw.so.1", best))
	tests := []struct {
		name  string
		cache []byte
		want  map[string]loaded
	}{
		{"ldconfig's cache", image, map[string]loaded{"libwslhw.so.1": {variant, best}, "libwslprobe.so.1": {"FAIL", -1}}},
		{"merged", merged, map[string]loaded{"libwslhw.so.1": {variant, best}, "libwslprobe.so.1": {filepath.Join(wsl, "libwslprobe.so.1"), 42}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cache := filepath.Join(t.TempDir(), "ld.so.cache")
			writeFile(t, cache, tt.cache)
			if got := dlopenWith(t, cache, bin, "libwslhw.so.1", "libwslprobe.so.1"); fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Fatalf("dlopen: %v, want %v", got, tt.want)
			}
		})
	}
}
