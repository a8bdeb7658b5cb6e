// Package version maps what `git describe --tags --always --dirty` says to
// the version strings of each package format, which order them differently
// and allow different characters. The binaries carry the describe string
// itself (main.version); the packages carry these.
//
// A describe string is one of
//
//	TAG                    a tagged commit (v1.2.3, v1.2.3-rc1)
//	TAG-N-gHASH            N commits after TAG
//	HASH                   no tag yet (--always): taken as N commits after
//	                       0.0.0, N the commit count of HEAD
//
// each with an optional -dirty. TAG's leading "v" is dropped; the rest of
// a tag must be a version (digits and dots, with an optional -PRERELEASE).
//
// Every format sorts a later commit after an earlier one and after its tag,
// and a tag's pre-release before the tag:
//
//	describe           deb                  rpm (Version)        apk              semver (chart)
//	v1.2.3             1.2.3                1.2.3                1.2.3-r0         1.2.3
//	v1.2.3-rc1         1.2.3~rc1            1.2.3~rc1            1.2.3_rc1-r0     1.2.3-rc1
//	v1.2.3-12-gabcdef  1.2.3+12.gabcdef     1.2.3^12.gabcdef     1.2.3_git12-r0   1.2.3+12.gabcdef
//	abcdef (560)       0.0.0+560.gabcdef    0.0.0^560.gabcdef    0.0.0_git560-r0  0.0.0+560.gabcdef
//	...-dirty          ...+dirty/.dirty     ....dirty            (dropped)        ....dirty
//
// deb: '~' sorts before anything, '+' after the version (Debian policy
// 5.6.12). rpm: its Version holds no '-'; '~' is a pre-release and '^' a
// snapshot after a release (rpm 4.15+, Fedora's versioning guidelines);
// its Release is 1. apk: only its own suffixes (_rc, _git, ...) followed by
// digits, so a snapshot is _gitN and the hash and -dirty cannot be said;
// -r0 is its package release. semver: build metadata, which Helm accepts in
// a chart version.
package version

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Version is a describe string taken apart.
type Version struct {
	Describe string // as git said it
	Base     string // the tag without "v" and pre-release, or 0.0.0
	Pre      string // the tag's pre-release ("rc1"), or ""
	Commits  int    // commits after the tag (or since the start, untagged)
	Hash     string // abbreviated commit, when Commits > 0
	Dirty    bool
}

var (
	baseRe = regexp.MustCompile(`^[0-9]+(\.[0-9]+)*$`)
	preRe  = regexp.MustCompile(`^[0-9A-Za-z]+(\.[0-9A-Za-z]+)*$`)
	hashRe = regexp.MustCompile(`^[0-9a-f]{4,40}$`)
	snapRe = regexp.MustCompile(`^(.+)-([0-9]+)-g([0-9a-f]{4,40})$`)
	apkPre = regexp.MustCompile(`^(alpha|beta|pre|rc)\.?([0-9]*)$`)
)

// Parse takes a describe string apart; count is HEAD's commit count (git
// rev-list --count HEAD), used only when no tag exists.
func Parse(describe string, count int) (Version, error) {
	v := Version{Describe: describe}
	s, dirty := strings.CutSuffix(describe, "-dirty")
	v.Dirty = dirty
	if hashRe.MatchString(s) {
		if count < 1 {
			return Version{}, fmt.Errorf("version %q: no tag, and the commit count %d is not positive: pass git rev-list --count HEAD", describe, count)
		}
		v.Base, v.Commits, v.Hash = "0.0.0", count, s
		return v, nil
	}
	tag := s
	if m := snapRe.FindStringSubmatch(s); m != nil {
		n, err := strconv.Atoi(m[2])
		if err != nil {
			return Version{}, fmt.Errorf("version %q: commit count: %w", describe, err)
		}
		tag, v.Commits, v.Hash = m[1], n, m[3]
	}
	tag = strings.TrimPrefix(tag, "v")
	v.Base, v.Pre, _ = strings.Cut(tag, "-")
	if !baseRe.MatchString(v.Base) || (v.Pre != "" && !preRe.MatchString(v.Pre)) {
		return Version{}, fmt.Errorf("version %q: tag %q is not a version (v1.2.3 or v1.2.3-rc1): tag releases that way", describe, tag)
	}
	return v, nil
}

// Deb is the Debian package version (native: no Debian revision).
func (v Version) Deb() string { return v.compose("+") }

// RPM is the rpm Version tag; the Release is RPMRelease.
func (v Version) RPM() string { return v.compose("^") }

// compose is the base, "~" and the pre-release, snap and the commits after
// the tag, and -dirty, as deb and rpm say them (they differ only in what
// starts a snapshot).
func (v Version) compose(snap string) string {
	s := v.Base
	if v.Pre != "" {
		s += "~" + v.Pre
	}
	if v.Commits > 0 {
		s += fmt.Sprintf("%s%d.g%s", snap, v.Commits, v.Hash)
	}
	if v.Dirty {
		if v.Commits > 0 {
			s += ".dirty"
		} else {
			s += snap + "dirty"
		}
	}
	return s
}

// RPMRelease is the rpm Release tag: one build of each version.
const RPMRelease = "1"

// APK is the apk version without its -rN package release (APKRelease).
func (v Version) APK() string {
	s := v.Base
	if v.Pre != "" {
		s += "_" + apkSuffix(v.Pre)
	}
	if v.Commits > 0 {
		s += fmt.Sprintf("_git%d", v.Commits)
	}
	return s
}

// APKRelease is the apk package release (pkgrel).
const APKRelease = "0"

// apkSuffix maps a tag's pre-release to apk's: alpha, beta, pre and rc
// with an optional number are apk's own; anything else is a _pre.
func apkSuffix(pre string) string {
	if m := apkPre.FindStringSubmatch(pre); m != nil {
		return m[1] + m[2]
	}
	return "pre"
}

// SemVer is the SemVer 2 form, for the Helm chart's version.
func (v Version) SemVer() string {
	s := v.Base
	for strings.Count(s, ".") < 2 {
		s += ".0"
	}
	if v.Pre != "" {
		s += "-" + v.Pre
	}
	var meta []string
	if v.Commits > 0 {
		meta = append(meta, strconv.Itoa(v.Commits), "g"+v.Hash)
	}
	if v.Dirty {
		meta = append(meta, "dirty")
	}
	if len(meta) > 0 {
		s += "+" + strings.Join(meta, ".")
	}
	return s
}
