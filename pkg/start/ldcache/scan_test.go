package ldcache

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/emulated"
)

// wslDir builds, under root, a directory like the host's /usr/lib/wsl/lib
// (three identical libcuda copies, libraries without SONAME) plus the
// cases ldconfig treats specially, and returns its path relative to root.
func wslDir(t testing.TB, root string) string {
	t.Helper()
	const rel = "usr/lib/wsl/lib"
	dir := filepath.Join(root, rel)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	buildLibs(t, dir, map[string]string{
		"libcuda.so.1.1":    "libcuda.so.1", // WSL ships three identical
		"libcuda.so.1":      "libcuda.so.1", // copies, no symlinks
		"libcuda.so":        "libcuda.so.1",
		"libdxcore.so":      "",
		"libd3d12.so":       "",
		"libd3d12core.so":   "",
		"libnvidia-ml.so.1": "libnvidia-ml.so.1",
		"libfoo.so.1":       "libfoo.so.1",
		"libfoo.so.10":      "libfoo.so.10",
		"libfoo.so.2":       "libfoo.so.2",
		"libbar-2.0.so.0":   "libbar-2.0.so.0",
		"libz.so.1":         "libz.so.1",
		"liby.so.3.1":       "liby.so.3", // two versions, no file named
		"liby.so.3.10":      "liby.so.3", // like the SONAME
		"libx.so.2.5":       "libx.so.2",
		"libw.so.1.0":       "libw.so.1",
		"libnoshdr.so.1.0":  "libnoshdr.so.1",
		"libarm.so.1":       "libarm.so.1",
	})
	cuda := readFile(t, filepath.Join(dir, "libcuda.so.1.1"))
	// Stripped of section headers: only the program headers lead to the
	// SONAME.
	noshdr := readFile(t, filepath.Join(dir, "libnoshdr.so.1.0"))
	binary.LittleEndian.PutUint64(noshdr[40:], 0) // e_shoff
	binary.LittleEndian.PutUint32(noshdr[60:], 0) // e_shnum, e_shstrndx
	writeFile(t, filepath.Join(dir, "libnoshdr.so.1.0"), noshdr)
	arm := readFile(t, filepath.Join(dir, "libarm.so.1"))
	binary.LittleEndian.PutUint16(arm[18:], 183) // EM_AARCH64
	writeFile(t, filepath.Join(dir, "libarm.so.1"), arm)
	writeFile(t, filepath.Join(dir, "libtrunc.so.1"), cuda[:100])
	writeFile(t, filepath.Join(dir, "libgarbage.so"), []byte("INPUT(-lfoo)\n"))
	writeFile(t, filepath.Join(dir, "nvidia-smi"), cuda) // not a library name
	for link, target := range map[string]string{
		"libx.so":          "libx.so.2.5", // development link: cached under its own name
		"libw.so.1":        "libw.so.1.0", // SONAME link
		"libdangling.so.1": "nowhere",
	} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "libdir.so.1"), 0o755); err != nil {
		t.Fatal(err)
	}
	// An executable, not a shared object.
	src := filepath.Join(t.TempDir(), "main.c")
	writeFile(t, src, []byte("int main(void) { return 0; }\n"))
	if out, err := exec.Command("gcc", "-no-pie", "-o", filepath.Join(dir, "libexe.so"), src).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	return rel
}

func TestScanDir(t *testing.T) {
	emulated.Skip(t, "libraries gcc builds for this machine (TestScanDirTakesThisMachinesLibraries checks the machine)")
	root := t.TempDir()
	dir := filepath.Join(root, wslDir(t, root))
	entries, err := ScanDir(dir, "/usr/lib/wsl/lib/")
	if err != nil {
		t.Fatal(err)
	}
	const w = " (libc6,x86-64) => /usr/lib/wsl/lib/"
	want := "" +
		"\tlibz.so.1" + w + "libz.so.1\n" +
		"\tliby.so.3" + w + "liby.so.3.10\n" +
		"\tlibx.so.2" + w + "libx.so.2.5\n" +
		"\tlibx.so" + w + "libx.so\n" +
		"\tlibw.so.1" + w + "libw.so.1\n" +
		"\tlibnvidia-ml.so.1" + w + "libnvidia-ml.so.1\n" +
		"\tlibnoshdr.so.1" + w + "libnoshdr.so.1.0\n" +
		"\tlibfoo.so.10" + w + "libfoo.so.10\n" +
		"\tlibfoo.so.2" + w + "libfoo.so.2\n" +
		"\tlibfoo.so.1" + w + "libfoo.so.1\n" +
		"\tlibd3d12core.so" + w + "libd3d12core.so\n" + // a digit sorts after a letter
		"\tlibd3d12.so" + w + "libd3d12.so\n" +
		"\tlibdxcore.so" + w + "libdxcore.so\n" +
		"\tlibcuda.so.1" + w + "libcuda.so.1\n" +
		"\tlibbar-2.0.so.0" + w + "libbar-2.0.so.0\n"
	if got := listing(entries); got != want {
		t.Fatalf("ScanDir:\n%s\nwant\n%s", got, want)
	}
}

// The real ldconfig on the same directory makes the same keys in the same
// order. Paths differ only where ldconfig names a SONAME link it did not
// create (-X, as in a read-only mount): there ScanDir names the file
// ldconfig would have linked to.
func TestScanDirMatchesLdconfig(t *testing.T) {
	emulated.Skip(t, "comparing with the host's ldconfig, which is this machine's only natively")
	root := t.TempDir()
	rel := wslDir(t, root)
	data, verbose := ldconfigRoot(t, root, "/"+rel, "new")
	theirs, err := refParse(data)
	if err != nil {
		t.Fatal(err)
	}
	linkTarget := map[string]string{} // "soname -> file" lines of ldconfig -v
	for _, l := range strings.Split(verbose, "\n") {
		if soname, file, ok := strings.Cut(strings.TrimPrefix(l, "\t"), " -> "); ok {
			linkTarget[soname] = file
		}
	}
	ours, err := ScanDir(filepath.Join(root, rel), "/"+rel)
	if err != nil {
		t.Fatal(err)
	}
	if len(ours) != len(theirs) {
		t.Fatalf("ScanDir\n%s\nldconfig\n%s", listing(ours), listing(theirs))
	}
	for i, e := range theirs {
		want := e
		if _, err := os.Lstat(filepath.Join(root, e.Path)); errors.Is(err, fs.ErrNotExist) {
			want.Path = "/" + rel + "/" + linkTarget[e.Key]
		}
		if ours[i] != want {
			t.Errorf("entry %d: ScanDir %+v, want %+v (ldconfig %+v)", i, ours[i], want, e)
		}
	}
}

func TestScanDirErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	tests := []struct {
		name, hostDir, containerDir, want string
	}{
		{"relative container dir", t.TempDir(), "usr/lib/wsl/lib", `container directory "usr/lib/wsl/lib" is not an absolute path`},
		{"missing host dir", missing, "/usr/lib/wsl/lib", "list libraries: open " + missing + ": no such file or directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ScanDir(tt.hostDir, tt.containerDir)
			if err == nil || err.Error() != tt.want {
				t.Fatalf("ScanDir error %v, want %s", err, tt.want)
			}
		})
	}
}

func TestIsDSOName(t *testing.T) {
	tests := []struct {
		name string
		want bool
	}{
		{"libcuda.so.1", true},
		{"libdxcore.so", true},
		{"ld-linux-x86-64.so.2", true},
		{"ld.so.1", true},
		{"ld64.so.2", true},
		{"nvidia-smi", false},
		{"libso", false},
		{"dxcore.so", false},
	}
	for _, tt := range tests {
		if got := isDSOName(tt.name); got != tt.want {
			t.Errorf("isDSOName(%q) = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// mapMemo is a Memo in a map, recording what was kept.
type mapMemo struct {
	known map[string]memoAnswer
	kept  map[string]memoAnswer
}

type memoAnswer struct {
	id     FileID
	soname string
	lib    bool
}

func (m *mapMemo) Has(name string) bool {
	_, ok := m.known[name]
	return ok
}

func (m *mapMemo) Soname(name string, id FileID) (string, bool, bool) {
	a, ok := m.known[name]
	if !ok || a.id != id {
		return "", false, false
	}
	return a.soname, a.lib, true
}

func (m *mapMemo) Keep(name string, id FileID, soname string, lib bool) {
	m.kept[name] = memoAnswer{id, soname, lib}
}

// TestScanDirMemo: a scan with a memo gives ScanDir's entries, keeps what
// it found of every candidate under its FileID, and takes the memo's word
// for a file of the same name and FileID instead of reading it: a memo
// that lies about such a file is believed (so it was not read), one whose
// FileID differs in any field is not.
func TestScanDirMemo(t *testing.T) {
	emulated.Skip(t, "libraries gcc builds for this machine (TestScanDirTakesThisMachinesLibraries checks the machine)")
	root := t.TempDir()
	dir := filepath.Join(root, wslDir(t, root))
	want, err := ScanDir(dir, "/usr/lib/wsl/lib")
	if err != nil {
		t.Fatal(err)
	}
	first := &mapMemo{known: map[string]memoAnswer{}, kept: map[string]memoAnswer{}}
	got, err := ScanDirMemo(dir, "/usr/lib/wsl/lib", first)
	if err != nil {
		t.Fatal(err)
	}
	if listing(got) != listing(want) {
		t.Fatalf("with an empty memo:\n%s\nwant\n%s", listing(got), listing(want))
	}
	// Every candidate is kept, the skipped ones as not libraries; the
	// dangling link, the directory and nvidia-smi are not candidates.
	for name, w := range map[string]memoAnswer{
		"libcuda.so.1":     {soname: "libcuda.so.1", lib: true},
		"libdxcore.so":     {lib: true},
		"libx.so":          {soname: "libx.so.2", lib: true}, // what the file says; ScanDir renames the link's key
		"libarm.so.1":      {},
		"libgarbage.so":    {},
		"libexe.so":        {},
		"libtrunc.so.1":    {},
		"libnoshdr.so.1.0": {soname: "libnoshdr.so.1", lib: true},
	} {
		k, ok := first.kept[name]
		if !ok || k.soname != w.soname || k.lib != w.lib || k.id.Ino == 0 || k.id.Size == 0 {
			t.Errorf("kept %s: %+v (kept: %v), want SONAME %q, library %v and its FileID", name, k, ok, w.soname, w.lib)
		}
	}
	for _, name := range []string{"libdangling.so.1", "libdir.so.1", "nvidia-smi"} {
		if _, ok := first.kept[name]; ok {
			t.Errorf("kept %s, which is no candidate", name)
		}
	}
	if len(first.kept) != 23 {
		t.Errorf("kept %d files, want 23: %v", len(first.kept), first.kept)
	}

	lie := func(change func(*FileID)) *mapMemo {
		m := &mapMemo{known: map[string]memoAnswer{}, kept: map[string]memoAnswer{}}
		for name, a := range first.kept {
			m.known[name] = a
		}
		a := m.known["libz.so.1"]
		a.soname = "libzz.so.9"
		change(&a.id)
		m.known["libz.so.1"] = a
		return m
	}
	for _, c := range []struct {
		name     string
		change   func(*FileID)
		believed bool
	}{
		{"same FileID", func(*FileID) {}, true},
		{"other inode", func(id *FileID) { id.Ino++ }, false},
		{"other size", func(id *FileID) { id.Size++ }, false},
		{"other mtime", func(id *FileID) { id.Mtime++ }, false},
		{"other ctime", func(id *FileID) { id.Ctime++ }, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := lie(c.change)
			got, err := ScanDirMemo(dir, "/usr/lib/wsl/lib", m)
			if err != nil {
				t.Fatal(err)
			}
			l := listing(got)
			if believed := strings.Contains(l, "libzz.so.9"); believed != c.believed {
				t.Errorf("memo's SONAME believed: %v, want %v:\n%s", believed, c.believed, l)
			}
			if !c.believed && l != listing(want) {
				t.Errorf("entries:\n%s\nwant\n%s", l, listing(want))
			}
		})
	}
}

// An arm64 WSL host's lib dir holds aarch64 libraries, an x86_64 host's
// x86_64 ones; each build registers its own machine's, with its loader's
// flags (the values of glibc's ldconfig.h), and skips the other's: the
// loader ignores entries whose flags are not its own.
func TestScanDirTakesThisMachinesLibraries(t *testing.T) {
	want := map[string]struct {
		machine uint16
		flags   int32
		loader  string
	}{
		"amd64": {62, 0x0303, "/lib64/ld-linux-x86-64.so.2"},
		"arm64": {183, 0x0a03, "/lib/ld-linux-aarch64.so.1"},
	}
	w, ok := want[runtime.GOARCH]
	if !ok {
		t.Fatalf("no loader facts for GOARCH=%s", runtime.GOARCH)
	}
	if NativeLoader != w.loader {
		t.Errorf("NativeLoader = %s, want %s", NativeLoader, w.loader)
	}
	dir := t.TempDir()
	buildLibs(t, dir, map[string]string{"libx86.so.1": "libx86.so.1"})
	lib := readFile(t, filepath.Join(dir, "libx86.so.1"))
	for name, machine := range map[string]uint16{"libx86.so.1": 62, "libarm.so.1": 183} {
		b := bytes.Clone(lib)
		binary.LittleEndian.PutUint16(b[18:], machine) // e_machine
		writeFile(t, filepath.Join(dir, name), bytes.Replace(b, []byte("libx86.so.1"), []byte(name), 1))
	}
	got, err := ScanDir(dir, "/usr/lib/wsl/lib")
	if err != nil {
		t.Fatal(err)
	}
	wantName := map[uint16]string{62: "libx86.so.1", 183: "libarm.so.1"}[w.machine]
	if len(got) != 1 || got[0].Key != wantName || got[0].Flags != w.flags || got[0].Path != "/usr/lib/wsl/lib/"+wantName {
		t.Errorf("ScanDir on %s = %+v, want only %s with flags %#x", runtime.GOARCH, got, wantName, w.flags)
	}
}
