package main

import (
	"archive/tar"
	"compress/gzip"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"
)

// entry is one file of an archive: its content from src, or a directory.
type entry struct {
	name string // path in the archive, no leading "/"
	src  string // "" for a directory
	mode int64
}

func tarCmd(args []string) error {
	fs := flag.NewFlagSet("tar", flag.ContinueOnError)
	out := fs.String("out", "", "the .tar.gz to write")
	prefix := fs.String("prefix", "", "directory every entry is under (NAME/)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	when, err := sourceDate()
	if err != nil {
		return err
	}
	var files []entry
	for _, a := range fs.Args() {
		src, dst, ok := strings.Cut(a, "=")
		if !ok || src == "" || dst == "" {
			return fmt.Errorf("tar: %q: want SRC=DST[:MODE]", a)
		}
		e := entry{name: path.Clean(*prefix + dst), src: src, mode: 0o644}
		if d, m, ok := strings.Cut(dst, ":"); ok {
			n, err := strconv.ParseInt(m, 8, 32)
			if err != nil || n > 0o777 {
				return fmt.Errorf("tar: %q: mode %q is not octal permission bits", a, m)
			}
			e.name, e.mode = path.Clean(*prefix+d), n
		}
		files = append(files, e)
	}
	return writeTarGz(*out, files, when)
}

// writeTarGz writes files, and the directories above them, sorted by
// name, owned by root, every time when: the same files give the same
// bytes.
func writeTarGz(out string, files []entry, when time.Time) error {
	all := map[string]entry{}
	for _, e := range files {
		if _, dup := all[e.name]; dup {
			return fmt.Errorf("tar: %s twice", e.name)
		}
		all[e.name] = e
		for d := path.Dir(e.name); d != "." && d != "/"; d = path.Dir(d) {
			if _, ok := all[d]; !ok {
				all[d] = entry{name: d, mode: 0o755}
			}
		}
	}
	names := make([]string, 0, len(all))
	for n := range all {
		names = append(names, n)
	}
	sort.Strings(names)

	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer f.Close()
	zw, err := gzip.NewWriterLevel(f, gzip.BestCompression)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(zw)
	for _, n := range names {
		e := all[n]
		h := &tar.Header{Name: n, Mode: e.mode, ModTime: when, Uname: "root", Gname: "root", Format: tar.FormatPAX}
		if e.src == "" {
			h.Typeflag, h.Name = tar.TypeDir, n+"/"
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
			continue
		}
		if err := addFile(tw, h, e.src); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return f.Close()
}

func addFile(tw *tar.Writer, h *tar.Header, src string) error {
	r, err := os.Open(src)
	if err != nil {
		return err
	}
	defer r.Close()
	st, err := r.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("tar: %s is not a regular file", src)
	}
	h.Typeflag, h.Size = tar.TypeReg, st.Size()
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	if _, err := io.Copy(tw, r); err != nil {
		return fmt.Errorf("tar: copy %s: %w", src, err)
	}
	return nil
}
