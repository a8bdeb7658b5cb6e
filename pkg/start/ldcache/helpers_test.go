package ldcache

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/privileged"
)

// needTool skips the test when a program it compares against is missing.
func needTool(t testing.TB, name string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		t.Skipf("%s not installed: this test compares with the real tool", name)
	}
}

// needRoot skips tests that need mount namespaces.
func needRoot(t testing.TB) {
	t.Helper()
	privileged.Require(t, "binds a cache over /etc/ld.so.cache in a private mount namespace")
}

// buildLib compiles a tiny shared object at dir/file whose wslprobe()
// returns ret, with the given SONAME ("" for none).
func buildLib(t testing.TB, dir, file, soname string, ret int) {
	t.Helper()
	needTool(t, "gcc")
	src := filepath.Join(t.TempDir(), "lib.c")
	if err := os.WriteFile(src, fmt.Appendf(nil, "int wslprobe(void) { return %d; }\n", ret), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"-shared", "-fPIC", "-o", filepath.Join(dir, file), src}
	if soname != "" {
		args = append(args, "-Wl,-soname,"+soname)
	}
	if out, err := exec.Command("gcc", args...).CombinedOutput(); err != nil {
		t.Fatalf("gcc %s: %v\n%s", file, err, out)
	}
}

// sonamePlaceholder is the SONAME buildLibs compiles once and then
// overwrites in each copy: one gcc run instead of one per library.
const sonamePlaceholder = "libwsltemplate.so.0000000000000000000000000000000000000000000000000"

// buildLibs writes shared objects with the given SONAMEs ("" for none)
// into dir, keyed by file name.
func buildLibs(t testing.TB, dir string, libs map[string]string) {
	t.Helper()
	tmp := t.TempDir()
	buildLib(t, tmp, "with.so", sonamePlaceholder, 1)
	buildLib(t, tmp, "without.so", "", 1)
	with, without := readFile(t, filepath.Join(tmp, "with.so")), readFile(t, filepath.Join(tmp, "without.so"))
	for file, soname := range libs {
		data := without
		if soname != "" {
			if len(soname) > len(sonamePlaceholder) {
				t.Fatalf("SONAME %q is longer than the placeholder", soname)
			}
			padded := soname + strings.Repeat("\x00", len(sonamePlaceholder)-len(soname))
			data = bytes.Replace(with, []byte(sonamePlaceholder), []byte(padded), -1)
		}
		writeFile(t, filepath.Join(dir, file), data)
	}
}

// writeFile writes a test fixture file.
func writeFile(t testing.TB, p string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFile(t testing.TB, p string) []byte {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// listing prints entries as `ldconfig -p` does (print_entry in glibc's
// elf/cache.c), for the x86 flags: one line per entry.
func listing(entries []Entry) string {
	var b strings.Builder
	for _, e := range entries {
		kind := "unknown or unsupported flag"
		if e.Flags&0xff == 3 {
			kind = "libc6"
		}
		switch e.Flags & 0xff00 {
		case 0x0300:
			kind += ",x86-64"
		case 0x0800:
			kind += ",x32"
		case 0:
		default:
			kind += fmt.Sprintf(",%d", e.Flags&0xff00)
		}
		switch {
		case isExtension(e.HWCap):
			kind += `, hwcap: "` + e.HWCapsSubdir + `"`
		case e.HWCap != 0:
			kind += fmt.Sprintf(", hwcap: 0x%016x", e.HWCap)
		}
		fmt.Fprintf(&b, "\t%s (%s) => %s\n", e.Key, kind, e.Path)
	}
	return b.String()
}

// entryLines keeps the entry lines of `ldconfig -p` output, without the
// count and generator lines that name the file and the writer.
func entryLines(out string) string {
	var b strings.Builder
	for _, l := range strings.SplitAfter(out, "\n") {
		if strings.HasPrefix(l, "\t") {
			b.WriteString(l)
		}
	}
	return b.String()
}

// ldconfigList is what glibc's own reader sees in a cache file.
func ldconfigList(t testing.TB, cache string) string {
	t.Helper()
	needTool(t, "ldconfig")
	out, err := exec.Command("ldconfig", "-p", "-C", cache).CombinedOutput()
	if err != nil {
		t.Fatalf("ldconfig -p -C %s: %v\n%s", cache, err, out)
	}
	return entryLines(string(out))
}

// ldconfigRoot runs the real ldconfig on a root holding only dir, without
// creating links, and returns the cache it wrote and its verbose output.
func ldconfigRoot(t testing.TB, root, dir, format string) (cache []byte, verbose string) {
	t.Helper()
	needTool(t, "ldconfig")
	writeFile(t, filepath.Join(root, "etc/ld.so.conf"), []byte(dir+"\n"))
	cmd := exec.Command("ldconfig", "-v", "-X", "-c", format, "-r", root, "-C", "/etc/ld.so.cache", "-f", "/etc/ld.so.conf")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", cmd, err, out)
	}
	return readFile(t, filepath.Join(root, "etc/ld.so.cache")), string(out)
}
