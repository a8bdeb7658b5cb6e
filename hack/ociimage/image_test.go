package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// readArchive returns the archive's files by name.
func readArchive(t *testing.T, data []byte) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		files[h.Name] = b
	}
}

// writeTwice writes img twice, fails t unless both archives are the same
// bytes (the build is reproducible), and returns the archive's files.
func writeTwice(t *testing.T, img Image) map[string][]byte {
	t.Helper()
	var a, b bytes.Buffer
	if err := img.Write(&a); err != nil {
		t.Fatal(err)
	}
	img.Write(&b)
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Error("two writes of the same image differ: the build is not reproducible")
	}
	return readArchive(t, a.Bytes())
}

// blobs returns a reader of the archive's blobs by digest that fails t
// for a blob missing or not hashing to its name.
func blobs(t *testing.T, files map[string][]byte) func(digest string) []byte {
	return func(digest string) []byte {
		t.Helper()
		data, ok := files["blobs/sha256/"+strings.TrimPrefix(digest, "sha256:")]
		if !ok {
			t.Fatalf("blob %s missing", digest)
		}
		if h := sha256.Sum256(data); "sha256:"+hex.EncodeToString(h[:]) != digest {
			t.Fatalf("blob %s does not hash to its name", digest)
		}
		return data
	}
}

func TestWriteIsALayoutAndADockerArchive(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "plugin")
	os.WriteFile(src, []byte("binary"), 0o600)
	img := Image{Ref: "localhost/wsl-gpu-hook:v1", Files: []File{{Src: src, Dst: "/bin/plugin", Mode: 0o755}},
		Entrypoint: []string{"/bin/plugin"}, User: "65532:65532", Labels: map[string]string{"org.opencontainers.image.version": "v1"}}
	files := writeTwice(t, img)
	var index struct {
		Manifests []struct {
			Digest      string
			Annotations map[string]string
		}
	}
	if err := json.Unmarshal(files["index.json"], &index); err != nil || len(index.Manifests) != 1 {
		t.Fatalf("index.json: %v %s", err, files["index.json"])
	}
	if got := index.Manifests[0].Annotations["io.containerd.image.name"]; got != img.Ref {
		t.Errorf("containerd's name annotation = %q, want %q", got, img.Ref)
	}
	blob := blobs(t, files)
	var man struct {
		Config struct{ Digest string }
		Layers []struct{ Digest string }
	}
	json.Unmarshal(blob(index.Manifests[0].Digest), &man)
	var cfg struct {
		Architecture, OS string
		Config           struct {
			User       string
			Entrypoint []string
			Labels     map[string]string
		}
		RootFS struct {
			DiffIDs []string `json:"diff_ids"`
		}
	}
	json.Unmarshal(blob(man.Config.Digest), &cfg)
	if cfg.Architecture != runtime.GOARCH || cfg.OS != "linux" || cfg.Config.User != "65532:65532" || cfg.Config.Labels["org.opencontainers.image.version"] != "v1" {
		t.Errorf("config: %+v", cfg)
	}
	zr, err := gzip.NewReader(bytes.NewReader(blob(man.Layers[0].Digest)))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(zr)
	if h := sha256.Sum256(raw); len(cfg.RootFS.DiffIDs) != 1 || cfg.RootFS.DiffIDs[0] != "sha256:"+hex.EncodeToString(h[:]) {
		t.Errorf("diff_ids %v do not match the layer", cfg.RootFS.DiffIDs)
	}
	tr := tar.NewReader(bytes.NewReader(raw))
	var names []string
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		names = append(names, h.Name)
		if h.Name == "bin/plugin" && (h.Mode != 0o755 || h.Uid != 0) {
			t.Errorf("bin/plugin mode %o uid %d, want 755 root", h.Mode, h.Uid)
		}
	}
	if len(names) != 2 || names[0] != "bin/" || names[1] != "bin/plugin" {
		t.Errorf("layer holds %v, want bin/ and bin/plugin", names)
	}
	var docker []struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	json.Unmarshal(files["manifest.json"], &docker)
	if len(docker) != 1 || docker[0].RepoTags[0] != img.Ref || files[docker[0].Config] == nil || files[docker[0].Layers[0]] == nil {
		t.Errorf("manifest.json does not name the image's blobs: %s", files["manifest.json"])
	}
}

func TestBadInput(t *testing.T) {
	for _, s := range []string{"a", "a:rel", ":/x", "a:/x:999999", "a:/x:rw"} {
		if _, err := parseAdd(s); err == nil {
			t.Errorf("parseAdd(%q) accepted", s)
		}
	}
	if err := (Image{Ref: "localhost/x", Files: []File{{Src: "/dev/null", Dst: "/x"}}}).Write(io.Discard); err == nil {
		t.Error("a reference with no tag was accepted")
	}
	if err := (Image{Ref: "localhost:5000/x", Files: []File{{Src: "/dev/null", Dst: "/x"}}}).Write(io.Discard); err == nil {
		t.Error("a registry port was taken for a tag")
	}
}

func TestMultiArchIsOneIndexUnderTheTag(t *testing.T) {
	dir := t.TempDir()
	for _, a := range []string{"amd64", "arm64"} {
		os.MkdirAll(filepath.Join(dir, a), 0o755)
		os.WriteFile(filepath.Join(dir, a, "plugin"), []byte("binary for "+a), 0o755)
	}
	img := Image{Ref: "localhost/wsl-gpu-hook:v1", Arches: []string{"arm64", "amd64"},
		Files:  []File{{Src: filepath.Join(dir, "{arch}", "plugin"), Dst: "/bin/plugin", Mode: 0o755}},
		Labels: map[string]string{"org.opencontainers.image.version": "v1"}}
	files := writeTwice(t, img)
	blob := blobs(t, files)
	type descriptor struct {
		MediaType   string
		Digest      string
		Platform    struct{ Architecture, OS string }
		Annotations map[string]string
	}
	var top struct{ Manifests []descriptor }
	json.Unmarshal(files["index.json"], &top)
	// One descriptor, the index, carrying the name: containerd makes one
	// image of it, not one per architecture under the same name.
	if len(top.Manifests) != 1 || top.Manifests[0].MediaType != mediaIndex ||
		top.Manifests[0].Annotations["io.containerd.image.name"] != img.Ref || top.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != "v1" {
		t.Fatalf("index.json = %s, want one image index named %s", files["index.json"], img.Ref)
	}
	var index struct {
		MediaType string
		Manifests []descriptor
	}
	json.Unmarshal(blob(top.Manifests[0].Digest), &index)
	if index.MediaType != mediaIndex || len(index.Manifests) != 2 {
		t.Fatalf("image index: %+v", index)
	}
	configs := map[string]string{}
	for i, want := range []string{"arm64", "amd64"} {
		d := index.Manifests[i]
		if d.MediaType != mediaManifest || d.Platform.Architecture != want || d.Platform.OS != "linux" {
			t.Errorf("manifest %d: %+v, want linux/%s", i, d, want)
		}
		var man struct {
			Config struct{ Digest string }
			Layers []struct{ Digest string }
		}
		json.Unmarshal(blob(d.Digest), &man)
		var cfg struct{ Architecture, OS string }
		json.Unmarshal(blob(man.Config.Digest), &cfg)
		if cfg.Architecture != want || cfg.OS != "linux" {
			t.Errorf("%s config says %s/%s", want, cfg.OS, cfg.Architecture)
		}
		configs[want] = man.Config.Digest
		zr, err := gzip.NewReader(bytes.NewReader(blob(man.Layers[0].Digest)))
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(zr)
		found := false
		for {
			h, err := tr.Next()
			if err != nil {
				break
			}
			if h.Name == "bin/plugin" {
				data, _ := io.ReadAll(tr)
				found = string(data) == "binary for "+want
			}
		}
		if !found {
			t.Errorf("%s layer does not hold the %s binary", want, want)
		}
	}
	var docker []struct {
		Config   string
		RepoTags []string
	}
	json.Unmarshal(files["manifest.json"], &docker)
	if len(docker) != 1 || docker[0].Config != "blobs/sha256/"+strings.TrimPrefix(configs["arm64"], "sha256:") || docker[0].RepoTags[0] != img.Ref {
		t.Errorf("manifest.json = %s, want the first architecture (arm64) under %s", files["manifest.json"], img.Ref)
	}
}

func TestArchRefusals(t *testing.T) {
	src := filepath.Join(t.TempDir(), "f")
	os.WriteFile(src, nil, 0o644)
	tests := []struct {
		name   string
		arches []string
		src    string
		want   string
	}{
		{"twice", []string{"amd64", "amd64"}, src, `architecture "amd64": want distinct GOARCH names such as amd64, arm64`},
		{"not a GOARCH", []string{"linux/arm64"}, src, `architecture "linux/arm64": want distinct GOARCH names such as amd64, arm64`},
		{"missing binary", []string{"amd64", "arm64"}, src + "-{arch}", "amd64 image: open " + src + "-amd64: no such file or directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Image{Ref: "localhost/x:v1", Arches: tt.arches, Files: []File{{Src: tt.src, Dst: "/x"}}}.Write(io.Discard)
			if err == nil || err.Error() != tt.want {
				t.Errorf("err = %v, want %q", err, tt.want)
			}
		})
	}
}
