package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/goreleaser/nfpm/v2"
	"github.com/goreleaser/nfpm/v2/files"
)

// TestExpandGlobs: a file entry with a glob becomes one entry per match,
// sorted, under its destination directory, each with its own file info;
// other entries stay as they are; a pattern that matches nothing is an
// error, not a package without the files.
func TestExpandGlobs(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"b.md", "a.md", "doc.go"} {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	info := &nfpm.Info{Overridables: nfpm.Overridables{Contents: files.Contents{
		{Source: "README.md", Destination: "/usr/share/doc/x/README.md"},
		{Source: filepath.Join(dir, "*.md"), Destination: "/usr/share/doc/x/docs", FileInfo: &files.ContentFileInfo{Mode: 0o644}},
		{Destination: "/usr/share/doc/x/docs", Type: files.TypeDir},
	}}}
	if err := expandGlobs(info); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range info.Contents {
		got = append(got, filepath.Base(c.Source)+" "+c.Destination)
	}
	want := "README.md /usr/share/doc/x/README.md,a.md /usr/share/doc/x/docs/a.md,b.md /usr/share/doc/x/docs/b.md,. /usr/share/doc/x/docs"
	if strings.Join(got, ",") != want {
		t.Errorf("contents %q, want %q", strings.Join(got, ","), want)
	}
	if info.Contents[1].FileInfo == info.Contents[2].FileInfo {
		t.Error("the expanded entries share one FileInfo: nfpm sets each file's size in it")
	}
	info.Contents = files.Contents{{Source: filepath.Join(dir, "*.txt"), Destination: "/x"}}
	if err := expandGlobs(info); err == nil || !strings.Contains(err.Error(), "matches no file") {
		t.Errorf("a pattern matching nothing: %v", err)
	}
}
