package cluster

import (
	"path/filepath"
	"strings"
)

// ImportStandIn imports into every node an image named ref built from the
// test image's files (busybox, glibc, cudaprobe) plus dirs, with env: a
// stand-in for a registry image a test cannot pull (a CUDA base image has
// no GPU tools of its own either: the hook brings them). A reference
// without a registry is Docker Hub's, as the kubelet resolves it.
func (c *Cluster) ImportStandIn(ref string, dirs, env []string) error {
	if !strings.Contains(strings.Split(ref, "/")[0], ".") {
		ref = "docker.io/" + ref
	}
	archive := filepath.Join(c.Dir, "images", strings.NewReplacer("/", "_", ":", "_").Replace(ref)+".tar")
	args := []string{c.Bins.OCIImage, "--out", archive, "--tag", ref, "--dir", filepath.Join(c.Dir, "images", "rootfs"), "--entrypoint", "/bin/sh"}
	for _, d := range dirs {
		args = append(args, "--mkdir", d)
	}
	for _, e := range env {
		args = append(args, "--env", e)
	}
	if _, err := run(args...); err != nil {
		return err
	}
	for _, n := range c.nodes {
		if err := n.ImportImage(archive); err != nil {
			return err
		}
	}
	return nil
}
