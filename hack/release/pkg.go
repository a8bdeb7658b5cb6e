package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/goreleaser/nfpm/v2"
	_ "github.com/goreleaser/nfpm/v2/apk" // the apk packager
	_ "github.com/goreleaser/nfpm/v2/deb" // the deb packager
	"github.com/goreleaser/nfpm/v2/files"
	_ "github.com/goreleaser/nfpm/v2/rpm" // the rpm packager

	"github.com/wsl-gpu-hook/wsl-gpu-hook/hack/release/version"
)

// includeLine is how an entry script sources packaging/scripts/common.sh
// when run from the source tree; in a package the line is replaced by that
// file, so every script stands alone.
const includeLine = `. "$(dirname "$0")/../common.sh" # inlined by hack/release`

func versionCmd(args []string) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	describe := fs.String("describe", "", "git describe --tags --always --dirty")
	count := fs.Int("count", 0, "git rev-list --count HEAD")
	if err := fs.Parse(args); err != nil {
		return err
	}
	v, err := version.Parse(*describe, *count)
	if err != nil {
		return err
	}
	fmt.Printf("deb=%s\nrpm=%s-%s\napk=%s-r%s\nsemver=%s\n", v.Deb(), v.RPM(), version.RPMRelease, v.APK(), version.APKRelease, v.SemVer())
	return nil
}

// formatVersion is the format's version and release.
func formatVersion(v version.Version, format string) (string, string, error) {
	switch format {
	case "deb":
		return v.Deb(), "", nil
	case "rpm":
		return v.RPM(), version.RPMRelease, nil
	case "apk":
		return v.APK(), version.APKRelease, nil
	}
	return "", "", fmt.Errorf("unknown package format %q: want deb, rpm or apk", format)
}

func pkgCmd(args []string) error {
	fs := flag.NewFlagSet("pkg", flag.ContinueOnError)
	config := fs.String("config", "packaging/nfpm.yaml", "the nfpm description")
	format := fs.String("format", "", "deb, rpm or apk")
	arch := fs.String("arch", "", "GOARCH of the binaries (amd64, arm64)")
	describe := fs.String("describe", "", "git describe --tags --always --dirty")
	count := fs.Int("count", 0, "git rev-list --count HEAD")
	commit := fs.String("commit", "", "the commit built (for the rpm changelog)")
	stage := fs.String("stage", "", "the generated files")
	out := fs.String("out", "", "directory the package is written to")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *arch == "" || *stage == "" || *out == "" {
		return fmt.Errorf("pkg: want -format, -arch, -describe, -stage and -out")
	}
	when, err := sourceDate()
	if err != nil {
		return err
	}
	v, err := version.Parse(*describe, *count)
	if err != nil {
		return err
	}
	ver, rel, err := formatVersion(v, *format)
	if err != nil {
		return err
	}
	vars := map[string]string{"ARCH": *arch, "VERSION": ver, "RELEASE": rel, "STAGE": *stage}
	info, err := load(*config, *format, vars)
	if err != nil {
		return err
	}
	info.MTime = when
	tmp, err := os.MkdirTemp("", "release-pkg-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if err := inlineScripts(info, tmp, when); err != nil {
		return err
	}
	if *format == "apk" {
		// .PKGINFO holds one line per key: apk's pkgdesc is the summary.
		info.Description, _, _ = strings.Cut(info.Description, "\n")
	}
	if *format == "rpm" {
		// rpm has a summary of its own and no "." paragraph lines; its
		// header names the build host, a constant here.
		_, rest, _ := strings.Cut(info.Description, "\n")
		info.Description = strings.ReplaceAll(rest, "\n.\n", "\n\n")
		info.RPM.BuildHost = "wsl-gpu-hook"
		markDocs(info)
		info.Changelog = filepath.Join(tmp, "changelog.yaml")
		if err := writeChangelog(info.Changelog, ver+"-"+rel, info.Maintainer, *commit, when); err != nil {
			return err
		}
	}
	p, err := nfpm.Get(*format)
	if err != nil {
		return err
	}
	target := filepath.Join(*out, p.ConventionalFileName(info))
	f, err := os.Create(target)
	if err != nil {
		return err
	}
	info.Target = target
	if err := p.Package(info, f); err != nil {
		f.Close()
		os.Remove(target)
		return fmt.Errorf("build %s: %w", *format, err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	fmt.Println(target)
	return nil
}

// markDocs marks what rpmbuild marks %doc and %license by where it is:
// files under /usr/share/doc and /usr/share/man, and under
// /usr/share/licenses. (nfpm's doc and license types would leave the files
// out of the deb and apk.)
func markDocs(info *nfpm.Info) {
	for _, c := range info.Contents {
		if c.Type != "" && c.Type != files.TypeFile {
			continue
		}
		switch {
		case strings.HasPrefix(c.Destination, "/usr/share/doc/"), strings.HasPrefix(c.Destination, "/usr/share/man/"):
			c.Type = files.TypeRPMDoc
		case strings.HasPrefix(c.Destination, "/usr/share/licenses/"):
			c.Type = files.TypeRPMLicense
		}
	}
}

// load reads the description for one format with vars expanded.
func load(config, format string, vars map[string]string) (*nfpm.Info, error) {
	c, err := nfpm.ParseFileWithEnvMapping(config, func(k string) string {
		v, ok := vars[k]
		if !ok {
			// A variable nobody set would expand to "" silently.
			return "${" + k + "}"
		}
		return v
	})
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", config, err)
	}
	info, err := c.Get(format)
	if err != nil {
		return nil, fmt.Errorf("read %s for %s: %w", config, format, err)
	}
	if err := expandGlobs(info); err != nil {
		return nil, fmt.Errorf("%s: %w", config, err)
	}
	info = nfpm.WithDefaults(info)
	if err := nfpm.Validate(info); err != nil {
		return nil, fmt.Errorf("%s for %s: %w", config, format, err)
	}
	return info, nil
}

// inlineScripts replaces each maintainer script of info by a copy in dir
// with common.sh inlined where the script sources it, dated when (the apk
// takes a script's time from its file).
func inlineScripts(info *nfpm.Info, dir string, when time.Time) error {
	for _, s := range []*string{&info.Scripts.PreInstall, &info.Scripts.PostInstall, &info.Scripts.PreRemove,
		&info.Scripts.PostRemove, &info.APK.Scripts.PreUpgrade, &info.APK.Scripts.PostUpgrade} {
		if *s == "" {
			continue
		}
		data, err := inline(*s)
		if err != nil {
			return err
		}
		dst := filepath.Join(dir, strings.ReplaceAll(*s, "/", "_"))
		if err := os.WriteFile(dst, data, 0o755); err != nil {
			return err
		}
		if err := os.Chtimes(dst, when, when); err != nil {
			return err
		}
		*s = dst
	}
	return nil
}

// inline is the script at path with its include line replaced by
// common.sh from the directory above it.
func inline(path string) ([]byte, error) {
	script, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if bytes.Count(script, []byte(includeLine+"\n")) != 1 {
		return nil, fmt.Errorf("%s: want the line %s once", path, includeLine)
	}
	common, err := os.ReadFile(filepath.Join(filepath.Dir(filepath.Dir(path)), "common.sh"))
	if err != nil {
		return nil, err
	}
	common = bytes.TrimPrefix(common, []byte("# shellcheck shell=sh\n"))
	return bytes.Replace(script, []byte(includeLine+"\n"), common, 1), nil
}

// scriptsCmd writes a format's maintainer scripts as its package has them
// (for tests that run them without building a package).
func scriptsCmd(args []string) error {
	fs := flag.NewFlagSet("scripts", flag.ContinueOnError)
	config := fs.String("config", "packaging/nfpm.yaml", "the nfpm description")
	format := fs.String("format", "", "deb, rpm or apk")
	out := fs.String("out", "", "directory to write them to")
	if err := fs.Parse(args); err != nil {
		return err
	}
	info, err := load(*config, *format, map[string]string{"ARCH": "amd64", "VERSION": "0", "RELEASE": "", "STAGE": "/nonexistent"})
	if err != nil {
		return err
	}
	for _, s := range []string{info.Scripts.PreInstall, info.Scripts.PostInstall, info.Scripts.PreRemove,
		info.Scripts.PostRemove, info.APK.Scripts.PreUpgrade, info.APK.Scripts.PostUpgrade} {
		if s == "" {
			continue
		}
		data, err := inline(s)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(*out, filepath.Base(s)), data, 0o755); err != nil {
			return err
		}
	}
	return nil
}

// writeChangelog writes the rpm's one changelog entry (goreleaser/chglog's
// format, which nfpm reads): this build, of this commit.
func writeChangelog(path, evr, packager, commit string, when time.Time) error {
	note := fmt.Sprintf("Build of %s: the hook, the runtime wrapper, the CDI generator, install/uninstall for docker, podman, containerd and CDI, and doctor.", commit)
	yaml := fmt.Sprintf("- semver: %q\n  date: %s\n  packager: %q\n  changes:\n    - commit: %q\n      note: %q\n",
		evr, when.Format(time.RFC3339), packager, commit, note)
	return os.WriteFile(path, []byte(yaml), 0o644)
}

// expandGlobs turns a file entry whose source is a glob (docs/*.md) into
// one entry per match under its destination directory, before markDocs
// types them: nfpm expands globs only in entries of the plain file type,
// so an rpm %doc entry would be opened by its pattern. Glob sorts, so the
// packages stay reproducible.
func expandGlobs(info *nfpm.Info) error {
	var out files.Contents
	for _, c := range info.Contents {
		if (c.Type != "" && c.Type != files.TypeFile) || !strings.ContainsAny(c.Source, "*?[") {
			out = append(out, c)
			continue
		}
		matches, err := filepath.Glob(c.Source)
		if err != nil || len(matches) == 0 {
			return fmt.Errorf("%s matches no file (%v): fix the pattern", c.Source, err)
		}
		for _, m := range matches {
			e := *c
			e.Source, e.Destination = m, filepath.Join(c.Destination, filepath.Base(m))
			if c.FileInfo != nil {
				fi := *c.FileInfo
				e.FileInfo = &fi
			}
			out = append(out, &e)
		}
	}
	info.Contents = out
	return nil
}
