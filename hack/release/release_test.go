package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestStampChart(t *testing.T) {
	tests := []struct {
		name, meta, want, err string
	}{
		{name: "both", meta: "apiVersion: v2\nname: x\nversion: 0.1.0\nappVersion: \"0.1.0\"\nkubeVersion: \">=1.28.0-0\"\n",
			want: "apiVersion: v2\nname: x\nversion: 1.2.3+4.gabc\nappVersion: \"v1.2.3-4-gabc\"\nkubeVersion: \">=1.28.0-0\"\n"},
		{name: "no appVersion", meta: "name: x\nversion: 0.1.0\n", err: "want one version: and one appVersion: line, found 1 and 0"},
		{name: "nested keys do not count", meta: "name: x\nversion: 0.1.0\nappVersion: a\ndependencies:\n  - version: 1\n",
			want: "name: x\nversion: 1.2.3+4.gabc\nappVersion: \"v1.2.3-4-gabc\"\ndependencies:\n  - version: 1\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := stampChart([]byte(tt.meta), "1.2.3+4.gabc", "v1.2.3-4-gabc")
			if tt.err != "" {
				if err == nil || err.Error() != tt.err {
					t.Fatalf("stampChart: %v, want %s", err, tt.err)
				}
				return
			}
			if err != nil || string(got) != tt.want {
				t.Errorf("stampChart: %v\n%s\nwant\n%s", err, got, tt.want)
			}
		})
	}
}

func TestInline(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "deb"), 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(p, s string) {
		if err := os.WriteFile(filepath.Join(dir, p), []byte(s), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write("common.sh", "# shellcheck shell=sh\nstep() { echo step; }\n")
	write("deb/good", "#!/bin/sh\nset -e\n"+includeLine+"\nstep\n")
	write("deb/none", "#!/bin/sh\nstep\n")
	write("deb/twice", "#!/bin/sh\n"+includeLine+"\n"+includeLine+"\n")
	got, err := inline(filepath.Join(dir, "deb/good"))
	if want := "#!/bin/sh\nset -e\nstep() { echo step; }\nstep\n"; err != nil || string(got) != want {
		t.Errorf("inline: %v\n%s\nwant\n%s", err, got, want)
	}
	for _, name := range []string{"none", "twice"} {
		p := filepath.Join(dir, "deb", name)
		if _, err := inline(p); err == nil || err.Error() != p+": want the line "+includeLine+" once" {
			t.Errorf("inline %s: %v", name, err)
		}
	}
}

// TestTarGzSameBytes: the same files give the same archive whatever their
// times and modes on disk; entries are root's, dated when, with their
// directories.
func TestTarGzSameBytes(t *testing.T) {
	when := time.Unix(1764340000, 0).UTC()
	var archives [][]byte
	for i, mode := range []os.FileMode{0o600, 0o644} {
		dir := t.TempDir()
		src := filepath.Join(dir, "f")
		if err := os.WriteFile(src, []byte("content"), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(src, when.Add(time.Duration(i)*time.Hour), when.Add(time.Duration(i)*time.Hour)); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, "a.tar.gz")
		if err := writeTarGz(out, []entry{{name: "p/bin/f", src: src, mode: 0o755}}, when); err != nil {
			t.Fatal(err)
		}
		archives = append(archives, must(os.ReadFile(out)))
	}
	if !bytes.Equal(archives[0], archives[1]) {
		t.Error("the same files gave two archives")
	}
	zr := must(gzip.NewReader(bytes.NewReader(archives[0])))
	tr := tar.NewReader(zr)
	var got []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Uid != 0 || h.Gid != 0 || h.Uname != "root" || !h.ModTime.Equal(when) {
			t.Errorf("%s: %d:%d %s %v, want root's, dated %v", h.Name, h.Uid, h.Gid, h.Uname, h.ModTime, when)
		}
		got = append(got, h.Name+" "+os.FileMode(h.Mode).String())
	}
	if want := "p/ -rwxr-xr-x,p/bin/ -rwxr-xr-x,p/bin/f -rwxr-xr-x"; strings.Join(got, ",") != want {
		t.Errorf("entries %s, want %s", strings.Join(got, ","), want)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
