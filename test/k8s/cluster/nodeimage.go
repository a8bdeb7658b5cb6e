package cluster

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// NodeImage is the node containers' image: the cached Debian 13 root
// (hack/engines/root.sh) without its own engines, plus the cached
// containerd 2.4, runc 1.5, CNI plugins and kubelet v1.37.2 in
// /usr/local and /opt/cni/bin: what a kind node image holds, built from the
// test's own files because no registry is reachable.
const NodeImage = "localhost/wgk-node:1"

// nodeRootExcludes are the root's parts a node does not run (its engines,
// docs, locales, apt lists): half the root's size.
var nodeRootExcludes = []string{
	"./usr/bin/containerd*", "./usr/bin/ctr", "./usr/bin/docker", "./usr/bin/podman*",
	"./usr/sbin/dockerd", "./usr/sbin/docker-proxy", "./usr/sbin/runc", "./usr/bin/crun*",
	"./usr/lib/podman", "./usr/libexec/podman", "./usr/lib/cni",
	"./usr/share/doc", "./usr/share/man", "./usr/share/locale",
	"./var/cache/apt", "./var/lib/apt/lists", "./.wsl-gpu-hook-packages",
}

// writeNodeImage writes NodeImage as a docker-save archive (what `docker
// load` reads) to w: one uncompressed layer made by tar from root and the
// engine bin dirs, laid out under dir.
func writeNodeImage(w io.Writer, dir, root string, b Binaries, runc string) error {
	extra := filepath.Join(dir, "extra")
	for _, d := range []string{"usr/local/bin", "usr/local/sbin", "opt/cni/bin"} {
		if err := os.MkdirAll(filepath.Join(extra, d), 0o755); err != nil {
			return err
		}
	}
	// Hard links: the same file system as the cache on this machine; a
	// copy where it is not.
	place := func(src, dst string) error {
		dst = filepath.Join(extra, dst)
		if err := os.Link(src, dst); err == nil {
			return nil
		}
		_, err := run("cp", src, dst)
		return err
	}
	files := map[string]string{
		filepath.Join(b.Kube, "kube"):                          "usr/local/bin/kubelet",
		filepath.Join(b.Containerd, "containerd"):              "usr/local/bin/containerd",
		filepath.Join(b.Containerd, "containerd-shim-runc-v2"): "usr/local/bin/containerd-shim-runc-v2",
		filepath.Join(b.Containerd, "ctr"):                     "usr/local/bin/ctr",
		filepath.Join(runc, "runc"):                            "usr/local/sbin/runc",
	}
	for _, p := range []string{"bridge", "host-local", "loopback", "portmap"} {
		files[filepath.Join(b.CNI, p)] = "opt/cni/bin/" + p
	}
	var extras []string
	for src, dst := range files {
		if err := place(src, dst); err != nil {
			return err
		}
		if !strings.HasPrefix(dst, "opt/") {
			extras = append(extras, "./"+dst)
		}
	}
	sort.Strings(extras)
	layer := filepath.Join(dir, "layer.tar")
	args := []string{"-cf", layer, "--numeric-owner", "--hard-dereference", "-C", root}
	for _, x := range nodeRootExcludes {
		args = append(args, "--exclude", x)
	}
	// The root has ./usr/local/bin but no ./opt/cni: a path twice in a
	// layer is refused by docker load.
	args = append(append(args, ".", "-C", extra, "./opt/cni"), extras...)
	if out, err := exec.Command("tar", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("tar the node image's layer: %v: %s", err, out)
	}
	defer os.Remove(layer)
	f, err := os.Open(layer)
	if err != nil {
		return err
	}
	defer f.Close()
	h := sha256.New()
	size, err := io.Copy(h, f)
	if err != nil {
		return err
	}
	config, _ := json.Marshal(map[string]any{
		"architecture": "amd64", "os": "linux",
		"config": map[string]any{
			"Env":        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
			"Entrypoint": []string{"/bin/sh"},
		},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + hex.EncodeToString(h.Sum(nil))}},
	})
	manifest, _ := json.Marshal([]map[string]any{{"Config": "config.json", "RepoTags": []string{NodeImage}, "Layers": []string{"layer.tar"}}})
	tw := tar.NewWriter(w)
	for _, e := range []struct {
		name string
		data []byte
	}{{"config.json", config}, {"manifest.json", manifest}} {
		if err := tw.WriteHeader(&tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.data)), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		if _, err := tw.Write(e.data); err != nil {
			return err
		}
	}
	if err := tw.WriteHeader(&tar.Header{Name: "layer.tar", Mode: 0o644, Size: size, Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	if _, err := io.Copy(tw, f); err != nil {
		return err
	}
	return tw.Close()
}
