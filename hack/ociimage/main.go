// Command ociimage writes a container image as one archive with no
// registry, no daemon and no network: an OCI image layout (index.json,
// blobs) that also carries Docker's manifest.json, so `ctr images import`,
// `podman load`, `docker load` and `kind load image-archive` all accept it.
// One layer per architecture, owned by root, every timestamp fixed: the
// same inputs give the same image digest.
//
//	ociimage --out FILE --tag NAME:TAG [--arch GOARCH]... [--add SRC:DST[:MODE]]... [--dir ROOTFS]
//	         [--mkdir PATH[:MODE]]... [--entrypoint PATH,ARG...] [--user UID:GID] [--env K=V]... [--label K=V]...
//
// Without --arch the image is this machine's architecture. With several,
// the archive is one image index (one manifest per architecture) under the
// tag; {arch} in an --add source stands for each architecture in turn
// (--add 'bin/linux-{arch}/tool:/usr/bin/tool'). Docker's manifest.json,
// which holds one image per tag, names the first --arch: `docker load`
// without the containerd image store loads that one, the others pick
// their platform from the index.
//
// `make image` uses it for the device plugin's image; the tests for their
// pause and workload images.
package main

import (
	"flag"
	"fmt"
	iofs "io/fs"
	"os"
	"strconv"
	"strings"
)

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "ociimage:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("ociimage", flag.ContinueOnError)
	out := fs.String("out", "", "write the archive to `FILE`")
	tag := fs.String("tag", "", "image reference `NAME:TAG` (e.g. localhost/wsl-gpu-hook:v1)")
	dir := fs.String("dir", "", "put the tree under `ROOTFS` in the layer")
	entry := fs.String("entrypoint", "", "comma-separated entrypoint")
	user := fs.String("user", "", "`UID:GID` the image runs as by default")
	var adds, envs, labels, dirs, arches listFlag
	fs.Var(&arches, "arch", "write an image for `GOARCH` (amd64, arm64), repeatable; the first is Docker's")
	fs.Var(&dirs, "mkdir", "add directory `PATH[:MODE]` (octal; default 755), repeatable")
	fs.Var(&adds, "add", "add file `SRC:DST[:MODE]` (octal mode; default the source's), repeatable")
	fs.Var(&envs, "env", "`K=V` in the image's environment, repeatable")
	fs.Var(&labels, "label", "`K=V` label and manifest annotation, repeatable")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" || *tag == "" || (len(adds) == 0 && *dir == "") {
		return fmt.Errorf("want --out FILE --tag NAME:TAG and --add or --dir")
	}
	img := Image{Ref: *tag, Arches: arches, Dir: *dir, User: *user, Env: envs, Labels: map[string]string{}}
	if *entry != "" {
		img.Entrypoint = strings.Split(*entry, ",")
	}
	for _, a := range adds {
		f, err := parseAdd(a)
		if err != nil {
			return err
		}
		img.Files = append(img.Files, f)
	}
	for _, d := range dirs {
		p, m, _ := strings.Cut(d, ":")
		mode := uint64(0o755)
		if m != "" {
			var err error
			if mode, err = strconv.ParseUint(m, 8, 32); err != nil || mode > 0o7777 {
				return fmt.Errorf("--mkdir %q: mode is not octal permission bits", d)
			}
		}
		if !strings.HasPrefix(p, "/") {
			return fmt.Errorf("--mkdir %q: want an absolute path", d)
		}
		img.Dirs = append(img.Dirs, Dir{Path: p, Mode: iofs.FileMode(mode)})
	}
	for _, l := range labels {
		k, v, ok := strings.Cut(l, "=")
		if !ok {
			return fmt.Errorf("--label %q: want K=V", l)
		}
		img.Labels[k] = v
	}
	f, err := os.Create(*out)
	if err != nil {
		return err
	}
	if err := img.Write(f); err != nil {
		f.Close()
		os.Remove(*out)
		return err
	}
	return f.Close()
}
