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
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Media types of the OCI image spec.
const (
	mediaIndex    = "application/vnd.oci.image.index.v1+json"
	mediaManifest = "application/vnd.oci.image.manifest.v1+json"
	mediaConfig   = "application/vnd.oci.image.config.v1+json"
	mediaLayer    = "application/vnd.oci.image.layer.v1.tar+gzip"
)

// archPlaceholder in a File's Src stands for the architecture whose image
// is being written: bin/linux-{arch}/tool.
const archPlaceholder = "{arch}"

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
	Ref string // NAME:TAG
	// Arches are the GOARCH names of the images written, the first the
	// one Docker's manifest.json names; none means runtime.GOARCH. With
	// more than one the archive holds an image index of them.
	Arches     []string
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

// descriptor is an OCI content descriptor of b.
func (b blob) descriptor(mediaType string) map[string]any {
	return map[string]any{"mediaType": mediaType, "digest": b.digest, "size": len(b.data)}
}

// platformImage is one architecture's image: its blobs and its manifest.
type platformImage struct {
	arch                    string
	layer, config, manifest blob
}

// Write writes the archive: OCI layout plus Docker's manifest.json. With
// one architecture index.json names its manifest, as before index support
// was needed; with several it names an image index of them (one descriptor,
// carrying the image's name), so containerd imports one image whose
// platforms it picks from, and podman loads this machine's.
func (img Image) Write(w io.Writer) error {
	name, tag, ok := cutTag(img.Ref)
	if !ok {
		return fmt.Errorf("image reference %q has no tag: want NAME:TAG", img.Ref)
	}
	arches := img.Arches
	if len(arches) == 0 {
		arches = []string{runtime.GOARCH}
	}
	var images []platformImage
	for i, arch := range arches {
		if !validArch(arch) || slices.Contains(arches[:i], arch) {
			return fmt.Errorf("architecture %q: want distinct GOARCH names such as amd64, arm64", arch)
		}
		p, err := img.platform(arch)
		if err != nil {
			return fmt.Errorf("%s image: %w", arch, err)
		}
		images = append(images, p)
	}
	names := map[string]string{
		"io.containerd.image.name":          img.Ref,
		"org.opencontainers.image.ref.name": tag,
	}
	blobs := []blob{}
	var manifests []map[string]any
	for _, p := range images {
		blobs = append(blobs, p.layer, p.config, p.manifest)
		d := p.manifest.descriptor(mediaManifest)
		d["platform"] = map[string]string{"architecture": p.arch, "os": "linux"}
		manifests = append(manifests, d)
	}
	top := manifests[0]
	if len(images) > 1 {
		data, _ := json.Marshal(map[string]any{
			"schemaVersion": 2,
			"mediaType":     mediaIndex,
			"manifests":     manifests,
			"annotations":   img.Labels,
		})
		idx := newBlob(data)
		blobs = append(blobs, idx)
		top = idx.descriptor(mediaIndex)
	}
	top["annotations"] = names
	index, _ := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     mediaIndex,
		"manifests":     []map[string]any{top},
	})
	// Docker's own archive format holds one image per tag: the first
	// architecture's.
	docker, _ := json.Marshal([]map[string]any{{
		"Config": images[0].config.path(), "RepoTags": []string{name + ":" + tag}, "Layers": []string{images[0].layer.path()},
	}})
	tw := tar.NewWriter(w)
	for _, d := range []string{"blobs/", "blobs/sha256/"} {
		if err := tw.WriteHeader(&tar.Header{Name: d, Typeflag: tar.TypeDir, Mode: 0o755, ModTime: epoch}); err != nil {
			return err
		}
	}
	files := []archiveFile{{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)}}
	written := map[string]bool{}
	for _, b := range blobs {
		// Architectures whose files are the same share their blobs.
		if !written[b.digest] {
			written[b.digest] = true
			files = append(files, archiveFile{b.path(), b.data})
		}
	}
	files = append(files, archiveFile{"index.json", index}, archiveFile{"manifest.json", docker})
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(f.data)), ModTime: epoch}); err != nil {
			return err
		}
		if _, err := tw.Write(f.data); err != nil {
			return err
		}
	}
	return tw.Close()
}

// archiveFile is one regular file of the archive.
type archiveFile struct {
	name string
	data []byte
}

// validArch accepts GOARCH-shaped names: lower-case letters and digits.
func validArch(a string) bool {
	return a != "" && strings.Trim(a, "abcdefghijklmnopqrstuvwxyz0123456789") == ""
}

// platform builds arch's layer, config and manifest.
func (img Image) platform(arch string) (platformImage, error) {
	raw, err := img.layer(arch)
	if err != nil {
		return platformImage{}, err
	}
	diff := sha256.Sum256(raw)
	var gz bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	zw.ModTime = epoch
	zw.Write(raw)
	if err := zw.Close(); err != nil {
		return platformImage{}, err
	}
	layer := newBlob(gz.Bytes())
	cfgData, _ := json.Marshal(map[string]any{
		"architecture": arch,
		"os":           "linux",
		"created":      epoch.Format(time.RFC3339),
		"config": map[string]any{
			"Entrypoint": img.Entrypoint,
			"User":       img.User,
			"Env":        img.Env,
			"Labels":     img.Labels,
		},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + hex.EncodeToString(diff[:])}},
	})
	config := newBlob(cfgData)
	manData, _ := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     mediaManifest,
		"config":        config.descriptor(mediaConfig),
		"layers":        []map[string]any{layer.descriptor(mediaLayer)},
		"annotations":   img.Labels,
	})
	return platformImage{arch: arch, layer: layer, config: config, manifest: newBlob(manData)}, nil
}

// cutTag splits NAME:TAG; a colon before the last slash is a registry port.
func cutTag(ref string) (name, tag string, ok bool) {
	i := strings.LastIndex(ref, ":")
	if i < 0 || strings.Contains(ref[i:], "/") || i == len(ref)-1 {
		return "", "", false
	}
	return ref[:i], ref[i+1:], true
}

// layer is arch's uncompressed layer tar: Dir's tree, then Files (their
// sources with {arch} replaced by arch), with
// parent directories, everything owned by root at epoch.
func (img Image) layer(arch string) ([]byte, error) {
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
		if err := addFile(strings.ReplaceAll(f.Src, archPlaceholder, arch), f.Dst, f.Mode); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
