package install

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestDiff(t *testing.T) {
	many := func(from, to int) string {
		var b strings.Builder
		for i := from; i <= to; i++ {
			b.WriteString(strings.Repeat("x", i%3) + string(rune('a'+i%26)) + "\n")
		}
		return b.String()
	}
	tests := []struct {
		name     string
		old, new string
		create   bool // Old is nil
		remove   bool // New is nil
		want     string
	}{
		{name: "insert in the middle", old: "a\nb\n", new: "a\nc\nb\n",
			want: "--- /etc/x\n+++ /etc/x\n@@ -1,2 +1,3 @@\n a\n+c\n b\n"},
		{name: "create", create: true, new: "a\nb\n",
			want: "--- /dev/null\n+++ /etc/x\n@@ -0,0 +1,2 @@\n+a\n+b\n"},
		{name: "remove", remove: true, old: "a\n",
			want: "--- /etc/x\n+++ /dev/null\n@@ -1 +0,0 @@\n-a\n"},
		{name: "replace a line", old: "a\nb\nc\n", new: "a\nB\nc\n",
			want: "--- /etc/x\n+++ /etc/x\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n"},
		{name: "append to a last line without newline", old: "a\nb", new: "a\nb\n\n# block\n",
			want: "--- /etc/x\n+++ /etc/x\n@@ -1,2 +1,4 @@\n a\n-b\n\\ No newline at end of file\n+b\n+\n+# block\n"},
		{name: "far-apart changes make two hunks", old: many(0, 19), new: "new\n" + many(0, 19) + "end\n",
			want: "--- /etc/x\n+++ /etc/x\n@@ -1,3 +1,4 @@\n+new\n a\n xb\n xxc\n@@ -18,3 +19,4 @@\n xxr\n s\n xt\n+end\n"},
		{name: "no change", old: "a\n", new: "a\n", want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Change{Path: "/etc/x", Old: []byte(tt.old), New: []byte(tt.new)}
			if tt.create {
				c.Old = nil
			}
			if tt.remove {
				c.New = nil
			}
			got := Diff(c)
			if got != tt.want {
				t.Errorf("diff:\n%s\nwant:\n%s", got, tt.want)
			}
			if gnu := gnuDiff(t, c); gnu != "" && got != gnu {
				t.Errorf("diff differs from diff -u:\n%s\ndiff -u:\n%s", got, gnu)
			}
		})
	}
}

// gnuDiff is diff -u's output for the change, with the same file names,
// or "" without a diff program.
func gnuDiff(t *testing.T, c Change) string {
	t.Helper()
	bin, err := exec.LookPath("diff")
	if err != nil {
		return ""
	}
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	if c.Old != nil {
		os.WriteFile(a, c.Old, 0o644)
	} else {
		a = "/dev/null"
	}
	if c.New != nil {
		os.WriteFile(b, c.New, 0o644)
	} else {
		b = "/dev/null"
	}
	out, _ := exec.Command(bin, "-u", "--label", name(c.Old, c.Path), "--label", name(c.New, c.Path), a, b).Output()
	return string(out)
}

func name(data []byte, path string) string {
	if data == nil {
		return "/dev/null"
	}
	return path
}

// Every install's diff is what diff -u prints for the same files.
func TestDiffMatchesGNUDiffOnInstalls(t *testing.T) {
	if _, err := exec.LookPath("diff"); err != nil {
		t.Skip("no diff program")
	}
	for _, f := range []struct {
		e       engine
		fixture string
		path    string
	}{
		{Docker, "daemon-nvidia.json", daemonJSON},
		{Docker, "daemon-compact.json", daemonJSON},
		{Docker, "daemon-bom.json", daemonJSON},
		{Docker, "daemon-ours-stale.json", daemonJSON},
		{Containerd, "containerd-default.toml", containerdCfg},
		{Containerd, "containerd-no-newline.toml", containerdCfg},
	} {
		t.Run(f.fixture, func(t *testing.T) {
			o := testOptions(t)
			place(t, o, f.fixture, f.path)
			p, err := f.e(o, false)
			if err != nil {
				t.Fatal(err)
			}
			c := p.Changes[len(p.Changes)-1]
			if got, want := Diff(c), gnuDiff(t, c); got != want {
				t.Errorf("diff:\n%s\ndiff -u:\n%s", got, want)
			}
		})
	}
}
