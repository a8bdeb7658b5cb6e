package packages

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// TestReleaseReproducible builds the release of HEAD twice (hack/release.sh,
// `make release`), from two clones at different paths, the second under
// another umask and time zone, and wants the same SHA256SUMS byte for
// byte. Then it checks what the release holds: every artifact of both
// architectures with its SBOM (which names the artifact's SHA-256), the
// version stamped into the binaries and each package, the packages'
// binaries the tarball's, the chart's appVersion the tag the image
// archive carries, and SHA256SUMS verifying.
func TestReleaseReproducible(t *testing.T) {
	if testing.Short() {
		t.Skip("release test: skipped under -short")
	}
	for _, tool := range []string{"git", "make", "sha256sum", "dpkg-deb", "rpm", "rpm2cpio", "cpio"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed: hack/setup.sh installs it", tool)
		}
	}
	repo := moduleRoot(t)
	head := strings.TrimSpace(run(t, repo, nil, "git", "rev-parse", "HEAD"))
	tmp := t.TempDir()
	var outs []string
	for i, env := range [][]string{nil, {"TZ=Pacific/Chatham", "UMASK=0027"}} {
		src := filepath.Join(tmp, "src"+strings.Repeat("-again", i))
		run(t, "", nil, "git", "clone", "-q", "--shared", "--no-checkout", repo, src)
		run(t, src, nil, "git", "checkout", "-q", "--detach", head)
		out := filepath.Join(tmp, "out"+strings.Repeat("-again", i))
		run(t, src, append(os.Environ(), env...), "sh", "-c", `umask "${UMASK:-0022}"; exec ./hack/release.sh "$1"`, "sh", out)
		outs = append(outs, out)
	}
	sums := string(must(os.ReadFile(filepath.Join(outs[0], "SHA256SUMS"))))
	if again := string(must(os.ReadFile(filepath.Join(outs[1], "SHA256SUMS")))); again != sums {
		t.Errorf("two builds of %s differ:\n%s\nand\n%s", head, sums, again)
	}
	out := outs[0]
	run(t, out, nil, "sha256sum", "--quiet", "-c", "SHA256SUMS")

	describe := strings.TrimSpace(run(t, filepath.Join(tmp, "src"), nil, "git", "describe", "--tags", "--always", "--dirty"))
	count := strings.TrimSpace(run(t, filepath.Join(tmp, "src"), nil, "git", "rev-list", "--count", "HEAD"))
	tool := filepath.Join(tmp, "release")
	run(t, repo, nil, "go", "build", "-C", "hack/release", "-o", tool, ".")
	v := map[string]string{}
	for _, line := range strings.Fields(run(t, "", nil, tool, "version", "-describe", describe, "-count", count)) {
		k, val, _ := strings.Cut(line, "=")
		v[k] = val
	}

	var artifacts []string
	for _, a := range []struct{ goarch, march string }{{"amd64", "x86_64"}, {"arm64", "aarch64"}} {
		artifacts = append(artifacts,
			"wsl-gpu-hook_"+describe+"_linux_"+a.goarch+".tar.gz",
			"wsl-gpu-hook_"+v["deb"]+"_"+a.goarch+".deb",
			"wsl-gpu-hook-"+v["rpm"]+"."+a.march+".rpm",
			"wsl-gpu-hook_"+v["apk"]+"_"+a.march+".apk")
	}
	artifacts = append(artifacts, "wsl-gpu-hook-image_"+describe+".tar")
	want := []string{"CHANGELOG.md", "SHA256SUMS", "wsl-gpu-hook-" + v["semver"] + ".tgz"}
	for _, a := range artifacts {
		want = append(want, a, a+".cdx.json")
	}
	sort.Strings(want)
	var got []string
	for _, e := range must(os.ReadDir(out)) {
		got = append(got, e.Name())
	}
	if !slices.Equal(got, want) {
		t.Fatalf("the release holds\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	t.Run("SBOMs", func(t *testing.T) {
		tarball := tarFiles(t, filepath.Join(out, artifacts[0]))
		for _, a := range artifacts {
			var bom struct {
				Metadata struct {
					Component struct {
						Version string
						Hashes  []struct{ Alg, Content string }
					}
				}
				Components []struct {
					Type, Name, Purl string
					Licenses         []any
					Evidence         struct{ Licenses []any }
					Properties       []struct{ Name, Value string }
				}
			}
			if err := json.Unmarshal(must(os.ReadFile(filepath.Join(out, a+".cdx.json"))), &bom); err != nil {
				t.Fatalf("%s.cdx.json: %v", a, err)
			}
			sum := sha256.Sum256(must(os.ReadFile(filepath.Join(out, a))))
			c := bom.Metadata.Component
			if c.Version != describe || len(c.Hashes) != 1 || c.Hashes[0].Content != hex.EncodeToString(sum[:]) {
				t.Errorf("%s.cdx.json describes %s %v, want %s and the artifact's SHA-256 %x", a, c.Version, c.Hashes, describe, sum)
			}
			arch := "amd64" // the image: this machine's
			if strings.Contains(a, "arm64") || strings.Contains(a, "aarch64") {
				arch = "arm64"
			}
			binaries := 0
			for _, m := range bom.Components {
				if !strings.Contains(m.Purl, "goarch="+arch+"&") {
					t.Errorf("%s.cdx.json: %s is for another arch: %s", a, m.Name, m.Purl)
				}
				if len(m.Licenses) == 0 && len(m.Evidence.Licenses) == 0 {
					t.Errorf("%s.cdx.json: %s has no license", a, m.Name)
				}
				if m.Type != "application" {
					continue
				}
				binaries++
				props := map[string]string{}
				for _, p := range m.Properties {
					props[p.Name] = p.Value
				}
				if props["cdx:gomod:binary:hash:SHA-256"] == "" || props["cdx:gomod:build:env:CGO_ENABLED"] != "0" {
					t.Errorf("%s.cdx.json: the binary %s has no hash or is not static: %v", a, m.Purl, props)
				}
				if a == artifacts[0] {
					bin := sha256.Sum256(tarball["wsl-gpu-hook_"+describe+"_linux_amd64/bin/"+props["cdx:gomod:binary:name"]])
					if props["cdx:gomod:binary:hash:SHA-256"] != hex.EncodeToString(bin[:]) {
						t.Errorf("%s.cdx.json: %s's hash is not the tarball's %s", a, m.Purl, props["cdx:gomod:binary:name"])
					}
				}
			}
			if want := map[bool]int{true: 2, false: 4}[strings.HasSuffix(a, ".deb") || strings.HasSuffix(a, ".rpm") || strings.HasSuffix(a, ".apk")]; binaries != want || len(bom.Components) < 5 {
				t.Errorf("%s.cdx.json lists %d binaries (want %d) and %d components", a, binaries, want, len(bom.Components))
			}
		}
	})

	t.Run("docs", func(t *testing.T) {
		// The README links the pages under docs/ and the code map: the
		// tarball carries every one of them beside it.
		tarball := tarFiles(t, filepath.Join(out, artifacts[0]))
		docs := []string{"README.md", "ARCHITECTURE.md"}
		for _, p := range must(filepath.Glob(filepath.Join(tmp, "src", "docs", "*.md"))) {
			docs = append(docs, "docs/"+filepath.Base(p))
		}
		for _, p := range docs {
			if _, ok := tarball["wsl-gpu-hook_"+describe+"_linux_amd64/"+p]; !ok {
				t.Errorf("the tarball has no %s", p)
			}
		}
	})

	t.Run("versions", func(t *testing.T) {
		tarball := tarFiles(t, filepath.Join(out, artifacts[0]))
		hook := tarball["wsl-gpu-hook_"+describe+"_linux_amd64/bin/wsl-gpu-hook"]
		bin := filepath.Join(t.TempDir(), "wsl-gpu-hook")
		if err := os.WriteFile(bin, hook, 0o755); err != nil {
			t.Fatal(err)
		}
		if got := run(t, "", nil, bin, "version"); got != "wsl-gpu-hook "+describe+"\n" {
			t.Errorf("the tarball's hook says %q, want the version %s", got, describe)
		}
		deb := filepath.Join(out, artifacts[1])
		if got := run(t, "", nil, "dpkg-deb", "-f", deb, "Version"); got != v["deb"]+"\n" {
			t.Errorf("the deb's Version: %q, want %s", got, v["deb"])
		}
		if got := run(t, "", nil, "sh", "-c", `dpkg-deb --fsys-tarfile "$1" | tar -xOf - ./usr/bin/wsl-gpu-hook`, "sh", deb); got != string(hook) {
			t.Error("the deb's /usr/bin/wsl-gpu-hook is not the tarball's")
		}
		rpm := filepath.Join(out, artifacts[2])
		if got := run(t, "", nil, "rpm", "-qp", "--qf", "%{VERSION}-%{RELEASE}", rpm); got != v["rpm"] {
			t.Errorf("the rpm's version: %q, want %s", got, v["rpm"])
		}
		// nfpm's payload names are absolute; --to-stdout writes no file.
		if got := run(t, t.TempDir(), nil, "sh", "-c", `rpm2cpio "$1" | cpio --quiet -i --to-stdout /usr/bin/wsl-gpu-hook`, "sh", rpm); got != string(hook) {
			t.Error("the rpm's /usr/bin/wsl-gpu-hook is not the tarball's")
		}
		apk := readAPK(t, filepath.Join(out, artifacts[3]))
		if !strings.Contains(string(apk[".PKGINFO"].data), "\npkgver = "+v["apk"]+"\n") {
			t.Errorf("the apk's .PKGINFO does not say pkgver = %s", v["apk"])
		}
		if !bytes.Equal(apk["usr/bin/wsl-gpu-hook"].data, hook) {
			t.Error("the apk's /usr/bin/wsl-gpu-hook is not the tarball's")
		}
	})

	t.Run("the chart pulls the image's tag", func(t *testing.T) {
		chart := tarFiles(t, filepath.Join(out, "wsl-gpu-hook-"+v["semver"]+".tgz"))
		meta := string(chart["wsl-gpu-hook/Chart.yaml"])
		for _, w := range []string{"\nversion: " + v["semver"] + "\n", "\nappVersion: \"" + describe + "\"\n"} {
			if !strings.Contains(meta, w) {
				t.Errorf("the chart's Chart.yaml lacks %q:\n%s", w, meta)
			}
		}
		if _, ok := chart["wsl-gpu-hook/templates/daemonset.yaml"]; !ok {
			t.Error("the chart lacks its templates")
		}
		image := tarFiles(t, filepath.Join(out, "wsl-gpu-hook-image_"+describe+".tar"))
		var manifest []struct{ RepoTags []string }
		if err := json.Unmarshal(image["manifest.json"], &manifest); err != nil {
			t.Fatal(err)
		}
		if len(manifest) == 0 || !slices.Contains(manifest[0].RepoTags, "localhost/wsl-gpu-hook:"+describe) {
			t.Errorf("the image archive is tagged %v, want localhost/wsl-gpu-hook:%s, the chart's default", manifest, describe)
		}
	})

	changelog := string(must(os.ReadFile(filepath.Join(out, "CHANGELOG.md"))))
	subject := strings.TrimSpace(run(t, repo, nil, "git", "log", "-1", "--format=%s (%h)", head))
	if !strings.HasPrefix(changelog, "## wsl-gpu-hook "+describe+" (") || !strings.Contains(changelog, "\n- "+subject+"\n") {
		t.Errorf("CHANGELOG.md lacks its heading or HEAD's line %q:\n%.400s", subject, changelog)
	}
}

// tarFiles reads a tar archive, gzip-compressed or not, into name -> content.
func tarFiles(t *testing.T, path string) map[string][]byte {
	t.Helper()
	data := must(os.ReadFile(path))
	var r io.Reader = bytes.NewReader(data)
	if bytes.HasPrefix(data, []byte{0x1f, 0x8b}) {
		zr, err := gzip.NewReader(r)
		if err != nil {
			t.Fatal(err)
		}
		r = zr
	}
	out := map[string][]byte{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("read %s: %v", path, err)
		}
		out[h.Name] = must(io.ReadAll(tr))
	}
}
