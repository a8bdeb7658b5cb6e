package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Media types of the OCI image spec.
const (
	mediaManifest = "application/vnd.oci.image.manifest.v1+json"
	mediaConfig   = "application/vnd.oci.image.config.v1+json"
	mediaLayer    = "application/vnd.oci.image.layer.v1.tar+gzip"
)

// epoch is every timestamp in the image: builds are reproducible.
var epoch = time.Unix(0, 0).UTC()

// File is one file added to the layer.
type File struct {
	Src, Dst string
	Mode     fs.FileMode // 0: the source's
}

// Dir is an empty directory in the layer (a /tmp with mode 1777).
type Dir struct {
	Path string
	Mode fs.FileMode
}

// Image is what goes into the archive.
type Image struct {
	Ref        string // NAME:TAG
	Files      []File
	Dir        string // a root tree, added before Files
	Dirs       []Dir
	Entrypoint []string
	User       string
	Env        []string
	Labels     map[string]string
}

func parseAdd(s string) (File, error) {
	parts := strings.Split(s, ":")
	if len(parts) < 2 || len(parts) > 3 || parts[0] == "" || !strings.HasPrefix(parts[1], "/") {
		return File{}, fmt.Errorf("--add %q: want SRC:/DST[:MODE]", s)
	}
	f := File{Src: parts[0], Dst: parts[1]}
	if len(parts) == 3 {
		m, err := strconv.ParseUint(parts[2], 8, 32)
		if err != nil || m > 0o7777 {
			return File{}, fmt.Errorf("--add %q: mode %q is not octal permission bits", s, parts[2])
		}
		f.Mode = fs.FileMode(m)
	}
	return f, nil
}

type blob struct {
	digest string // sha256:<hex>
	data   []byte
}

func newBlob(data []byte) blob {
	h := sha256.Sum256(data)
	return blob{"sha256:" + hex.EncodeToString(h[:]), data}
}

func (b blob) path() string { return "blobs/sha256/" + strings.TrimPrefix(b.digest, "sha256:") }

// Write writes the archive: OCI layout plus Docker's manifest.json.
func (img Image) Write(w io.Writer) error {
	name, tag, ok := cutTag(img.Ref)
	if !ok {
		return fmt.Errorf("image reference %q has no tag: want NAME:TAG", img.Ref)
	}
	raw, err := img.layer()
	if err != nil {
		return err
	}
	diff := sha256.Sum256(raw)
	var gz bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	zw.ModTime = epoch
	zw.Write(raw)
	if err := zw.Close(); err != nil {
		return err
	}
	layer := newBlob(gz.Bytes())
	cfg := map[string]any{
		"architecture": "amd64",
		"os":           "linux",
		"created":      epoch.Format(time.RFC3339),
		"config": map[string]any{
			"Entrypoint": img.Entrypoint,
			"User":       img.User,
			"Env":        img.Env,
			"Labels":     img.Labels,
		},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + hex.EncodeToString(diff[:])}},
	}
	cfgData, _ := json.Marshal(cfg)
	config := newBlob(cfgData)
	manData, _ := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     mediaManifest,
		"config":        map[string]any{"mediaType": mediaConfig, "digest": config.digest, "size": len(config.data)},
		"layers":        []map[string]any{{"mediaType": mediaLayer, "digest": layer.digest, "size": len(layer.data)}},
		"annotations":   img.Labels,
	})
	manifest := newBlob(manData)
	index, _ := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.index.v1+json",
		"manifests": []map[string]any{{
			"mediaType": mediaManifest, "digest": manifest.digest, "size": len(manifest.data),
			"platform": map[string]string{"architecture": "amd64", "os": "linux"},
			"annotations": map[string]string{
				"io.containerd.image.name":          img.Ref,
				"org.opencontainers.image.ref.name": tag,
			},
		}},
	})
	docker, _ := json.Marshal([]map[string]any{{
		"Config": config.path(), "RepoTags": []string{name + ":" + tag}, "Layers": []string{layer.path()},
	}})
	tw := tar.NewWriter(w)
	for _, d := range []string{"blobs/", "blobs/sha256/"} {
		if err := tw.WriteHeader(&tar.Header{Name: d, Typeflag: tar.TypeDir, Mode: 0o755, ModTime: epoch}); err != nil {
			return err
		}
	}
	for _, f := range []struct {
		name string
		data []byte
	}{
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{layer.path(), layer.data}, {config.path(), config.data}, {manifest.path(), manifest.data},
		{"index.json", index}, {"manifest.json", docker},
	} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(f.data)), ModTime: epoch}); err != nil {
			return err
		}
		if _, err := tw.Write(f.data); err != nil {
			return err
		}
	}
	return tw.Close()
}

// cutTag splits NAME:TAG; a colon before the last slash is a registry port.
func cutTag(ref string) (name, tag string, ok bool) {
	i := strings.LastIndex(ref, ":")
	if i < 0 || strings.Contains(ref[i:], "/") || i == len(ref)-1 {
		return "", "", false
	}
	return ref[:i], ref[i+1:], true
}

// layer is the uncompressed layer tar: Dir's tree, then Files, with
// parent directories, everything owned by root at epoch.
func (img Image) layer() ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	mkdirs := func(p string) error {
		var parents []string
		for d := path.Dir(p); d != "/" && d != "." && !dirs[d]; d = path.Dir(d) {
			parents = append(parents, d)
		}
		for i := len(parents) - 1; i >= 0; i-- {
			dirs[parents[i]] = true
			if err := tw.WriteHeader(&tar.Header{Name: strings.TrimPrefix(parents[i], "/") + "/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: epoch, Format: tar.FormatPAX}); err != nil {
				return err
			}
		}
		return nil
	}
	addFile := func(src, dst string, mode fs.FileMode) error {
		data, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		if mode == 0 {
			st, err := os.Stat(src)
			if err != nil {
				return err
			}
			mode = st.Mode().Perm()
		}
		if err := mkdirs(dst); err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Name: strings.TrimPrefix(dst, "/"), Typeflag: tar.TypeReg, Mode: int64(mode), Size: int64(len(data)), ModTime: epoch, Format: tar.FormatPAX}); err != nil {
			return err
		}
		_, err = tw.Write(data)
		return err
	}
	if img.Dir != "" {
		var paths []string
		err := filepath.WalkDir(img.Dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if p != img.Dir {
				paths = append(paths, p)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		sort.Strings(paths)
		for _, p := range paths {
			rel, _ := filepath.Rel(img.Dir, p)
			dst := "/" + filepath.ToSlash(rel)
			st, err := os.Lstat(p)
			if err != nil {
				return nil, err
			}
			switch {
			case st.IsDir():
				if err := mkdirs(dst + "/x"); err != nil {
					return nil, err
				}
			case st.Mode()&fs.ModeSymlink != 0:
				target, err := os.Readlink(p)
				if err != nil {
					return nil, err
				}
				if err := mkdirs(dst); err != nil {
					return nil, err
				}
				if err := tw.WriteHeader(&tar.Header{Name: strings.TrimPrefix(dst, "/"), Typeflag: tar.TypeSymlink, Linkname: target, Mode: 0o777, ModTime: epoch, Format: tar.FormatPAX}); err != nil {
					return nil, err
				}
			case st.Mode().IsRegular():
				if err := addFile(p, dst, st.Mode().Perm()); err != nil {
					return nil, err
				}
			default:
				return nil, fmt.Errorf("%s: only directories, regular files and symlinks go into an image", p)
			}
		}
	}
	for _, d := range img.Dirs {
		if err := mkdirs(d.Path); err != nil {
			return nil, err
		}
		dirs[d.Path] = true
		if err := tw.WriteHeader(&tar.Header{Name: strings.TrimPrefix(d.Path, "/") + "/", Typeflag: tar.TypeDir, Mode: int64(d.Mode), ModTime: epoch, Format: tar.FormatPAX}); err != nil {
			return nil, err
		}
	}
	for _, f := range img.Files {
		if err := addFile(f.Src, f.Dst, f.Mode); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
