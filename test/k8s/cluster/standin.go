package cluster

import (
	"path/filepath"
	"strings"
)

// ImportStandIn imports into every node an image named ref built from the
// test image's files (busybox, glibc, cudaprobe) plus dirs, with env: a
// stand-in for a registry image a test cannot pull (a CUDA base image has
// no GPU tools of its own either: the hook brings them).
func (c *Cluster) ImportStandIn(ref string, dirs, env []string) error {
	archive, err := WriteStandIn(c.Bins, filepath.Join(c.Dir, "images"), ref, dirs, env)
	if err != nil {
		return err
	}
	for _, n := range c.nodes {
		if err := n.ImportImage(archive); err != nil {
			return err
		}
	}
	return nil
}

// WriteStandIn writes the archive of a stand-in image named ref into dir,
// from the root WriteTestImage left there, and returns its path. A
// reference without a registry is Docker Hub's, as the kubelet resolves it.
func WriteStandIn(b Binaries, dir, ref string, dirs, env []string) (string, error) {
	if !strings.Contains(strings.Split(ref, "/")[0], ".") {
		ref = "docker.io/" + ref
	}
	archive := filepath.Join(dir, strings.NewReplacer("/", "_", ":", "_").Replace(ref)+".tar")
	args := []string{b.OCIImage, "--out", archive, "--tag", ref, "--dir", filepath.Join(dir, "rootfs"), "--entrypoint", "/bin/sh"}
	for _, d := range dirs {
		args = append(args, "--mkdir", d)
	}
	for _, e := range env {
		args = append(args, "--env", e)
	}
	_, err := run(args...)
	return archive, err
}
