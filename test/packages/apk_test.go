package packages

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha1"
	"debug/elf"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// apkFiles is what the apk installs, and nothing else: the deb's and rpm's
// files without the systemd unit (Alpine runs OpenRC) and Debian's
// copyright, changelog and lintian overrides; the license and the zsh
// completion where Alpine keeps them. docsFiles adds the pages the README
// links.
var apkFiles = []string{
	"etc/wsl-gpu-hook/config.toml",
	"usr/bin/wsl-gpu-ctl", "usr/bin/wsl-gpu-hook", "usr/bin/wsl-gpu-runtime",
	"usr/libexec/wsl-gpu-hook/nvidia-container-runtime-hook",
	"usr/share/bash-completion/completions/wsl-gpu-ctl",
	"usr/share/containers/oci/hooks.d/wsl-gpu-hook.json",
	"usr/share/doc/wsl-gpu-hook/README.md", "usr/share/doc/wsl-gpu-hook/examples/docker-gpus-path.conf",
	"usr/share/licenses/wsl-gpu-hook/LICENSE",
	"usr/share/man/man1/wsl-gpu-ctl.1.gz", "usr/share/man/man1/wsl-gpu-hook.1.gz", "usr/share/man/man1/wsl-gpu-runtime.1.gz",
	"usr/share/zsh/site-functions/_wsl-gpu-ctl",
}

// TestAPK reads the apk of each architecture as apk-tools would (Debian
// 12 and 13 have no apk-tools, so it is never installed here): its
// .PKGINFO (one line per key, the mapped version, Alpine's arch name), its
// scripts (common.sh inlined; valid for busybox's sh, Alpine's /bin/sh),
// and its data: exactly apkFiles (and their directories), root's, each
// file with the SHA-1 apk checks it against, static binaries of the arch.
func TestAPK(t *testing.T) {
	if testing.Short() {
		t.Skip("package test: skipped under -short")
	}
	repo := moduleRoot(t)
	for _, tt := range []struct {
		goarch, arch string
		machine      elf.Machine
	}{
		{"amd64", "x86_64", elf.EM_X86_64},
		{"arm64", "aarch64", elf.EM_AARCH64},
	} {
		t.Run(tt.goarch, func(t *testing.T) {
			apk := buildPackage(t, repo, t.TempDir(), tt.goarch, "apk", "v0.2.0-rc1-3-gabcdef0")
			if got, want := filepath.Base(apk), "wsl-gpu-hook_0.2.0_rc1_git3-r0_"+tt.arch+".apk"; got != want {
				t.Errorf("apk %s, want %s", got, want)
			}
			entries := readAPK(t, apk)
			info := string(entries[".PKGINFO"].data)
			for _, w := range []string{"pkgname = wsl-gpu-hook\n", "pkgver = 0.2.0_rc1_git3-r0\n", "arch = " + tt.arch + "\n", "license = Apache-2.0\n"} {
				if !strings.Contains(info, w) {
					t.Errorf(".PKGINFO lacks %q:\n%s", w, info)
				}
			}
			for _, line := range strings.Split(strings.TrimSpace(info), "\n") {
				if !strings.Contains(line, " = ") {
					t.Errorf(".PKGINFO line %q is not KEY = VALUE", line)
				}
			}
			for _, s := range []string{".post-install", ".post-upgrade", ".pre-deinstall", ".post-deinstall"} {
				script := entries[s].data
				if !bytes.HasPrefix(script, []byte("#!/bin/sh\n")) || bytes.Contains(script, []byte("common.sh\" #")) || !bytes.Contains(script, []byte("\nremove_ours() {")) {
					t.Errorf("%s is not a script with common.sh inlined:\n%s", s, script)
				}
				if bb, err := exec.LookPath("busybox"); err == nil {
					cmd := exec.Command(bb, "sh", "-n")
					cmd.Stdin = bytes.NewReader(script)
					if out, err := cmd.CombinedOutput(); err != nil {
						t.Errorf("busybox sh -n %s: %v\n%s", s, err, out)
					}
				}
			}

			var files []string
			for name, e := range entries {
				if strings.HasPrefix(name, ".") {
					continue
				}
				if e.hdr.Uid != 0 || e.hdr.Gid != 0 {
					t.Errorf("%s is owned by %d:%d, want root", name, e.hdr.Uid, e.hdr.Gid)
				}
				if e.hdr.Typeflag == tar.TypeDir {
					continue
				}
				files = append(files, name)
				if e.hdr.Typeflag == tar.TypeReg {
					sum := sha1.Sum(e.data)
					if got := e.hdr.PAXRecords["APK-TOOLS.checksum.SHA1"]; got != hex.EncodeToString(sum[:]) {
						t.Errorf("%s: APK-TOOLS.checksum.SHA1 %q, want the content's %x", name, got, sum)
					}
				}
			}
			sort.Strings(files)
			want := append(docsFiles(t, repo), apkFiles...)
			sort.Strings(want)
			if !slices.Equal(files, want) {
				t.Errorf("the apk's files:\n%s\nwant:\n%s", strings.Join(files, "\n"), strings.Join(want, "\n"))
			}
			if m := entries["etc/wsl-gpu-hook/config.toml"].hdr.Mode; m != 0o644 {
				t.Errorf("config.toml mode %o, want 644", m)
			}
			for _, b := range []string{"usr/bin/wsl-gpu-hook", "usr/bin/wsl-gpu-ctl"} {
				f, err := elf.NewFile(bytes.NewReader(entries[b].data))
				if err != nil {
					t.Fatalf("%s: %v", b, err)
				}
				if f.Machine != tt.machine {
					t.Errorf("%s is for %v, want %v", b, f.Machine, tt.machine)
				}
				for _, p := range f.Progs {
					if p.Type == elf.PT_INTERP {
						t.Errorf("%s has an interpreter: it is not static", b)
					}
				}
			}
		})
	}
}

// apkEntry is one member of an apk's tar streams.
type apkEntry struct {
	hdr  *tar.Header
	data []byte
}

// readAPK reads an apk: concatenated gzip streams (signature, control,
// data; an unsigned one has no signature) whose tar members follow one
// another, as apk-tools reads them.
func readAPK(t *testing.T, path string) map[string]apkEntry {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f) // multistream: every gzip member in turn
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]apkEntry{}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("read %s: %v", path, err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimSuffix(strings.TrimPrefix(h.Name, "./"), "/")
		if _, dup := out[name]; dup {
			t.Errorf("%s twice in the apk", name)
		}
		out[name] = apkEntry{hdr: h, data: data}
	}
	return out
}

// docsFiles are the pages every package ships beside the README, so that
// its links resolve in /usr/share/doc: ARCHITECTURE.md and docs/*.md.
func docsFiles(t *testing.T, repo string) []string {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join(repo, "docs", "*.md"))
	if err != nil || len(pages) == 0 {
		t.Fatalf("docs/*.md: %v, %d pages", err, len(pages))
	}
	out := []string{"usr/share/doc/wsl-gpu-hook/ARCHITECTURE.md"}
	for _, p := range pages {
		out = append(out, "usr/share/doc/wsl-gpu-hook/docs/"+filepath.Base(p))
	}
	return out
}
