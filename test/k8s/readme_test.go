package k8s

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/k8s/cluster"
)

// readmeBlock returns the first ```sh block after heading in the page.
func readmeBlock(t *testing.T, page, heading string) string {
	t.Helper()
	data, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(data), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("%s has no %q section", page, heading)
	}
	_, rest, ok = strings.Cut(rest, "\n```sh\n")
	block, _, closed := strings.Cut(rest, "\n```\n")
	if !ok || !closed {
		t.Fatalf("%s's %q section has no ```sh block", page, heading)
	}
	return block
}

// tool writes an executable script name into dir.
func tool(t *testing.T, dir, name, script string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+script), 0o755); err != nil {
		t.Fatal(err)
	}
}

// testREADME runs the chart's install block of docs/kubernetes.md (the
// block the README's Kubernetes line sends users to; the page marks it
// "run by test/k8s TestK8s/README") as a user types it, in the
// repository: `make image`, loading the archive into the nodes, `helm
// install` with the page's arguments, the page's pod, `kubectl logs`;
// and checks the output the page promises. Editing the page's commands
// so they no longer work fails this test.
//
// What the test supplies: kubectl and helm are the cluster's, with its admin
// kubeconfig; `kind load image-archive` does on each node what kind does
// there (ctr -n k8s.io images import), as no kind cluster runs here; and
// the pod's nvidia/cuda base image, a registry's, is a stand-in with the
// test image's files (glibc, busybox, no GPU tools: like the real base
// image, it gets nvidia-smi from the hook) under the same name.
func testREADME(t *testing.T, e env) {
	c := e.c.For(t)
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	block := readmeBlock(t, filepath.Join(root, "docs", "kubernetes.md"), "## Installing the chart")
	const cudaImage = "nvidia/cuda:12.6.3-base-ubuntu24.04"
	if !strings.Contains(block, "image: "+cudaImage) {
		t.Fatalf("the page's pod no longer runs %s: change the stand-in here with it:\n%s", cudaImage, block)
	}
	if err := c.ImportStandIn(cudaImage, []string{"/usr/bin", "/usr/sbin", "/usr/local/sbin"},
		[]string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}); err != nil {
		t.Fatal(err)
	}
	q := func(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
	bin := t.TempDir()
	helmHome := filepath.Join(c.Dir, "helm")
	tool(t, bin, "kubectl", fmt.Sprintf("exec %s --kubeconfig %s \"$@\"\n", q(c.Bins.Kubectl()), q(c.Kubeconfig)))
	tool(t, bin, "helm", fmt.Sprintf("export KUBECONFIG=%s HELM_CACHE_HOME=%s HELM_CONFIG_HOME=%s HELM_DATA_HOME=%s\nexec %s \"$@\"\n",
		q(c.Kubeconfig), q(helmHome+"/cache"), q(helmHome+"/config"), q(helmHome+"/data"), q(c.Bins.Helm())))
	var socks []string
	for _, n := range c.Nodes() {
		socks = append(socks, q(filepath.Join(n.Dir, "containerd.sock")))
	}
	tool(t, bin, "kind", fmt.Sprintf(`[ "$1 $2" = "load image-archive" ] && [ $# = 3 ] || { echo "kind: the test only does load image-archive FILE" >&2; exit 1; }
for sock in %s; do %s --address "$sock" -n k8s.io images import "$3" || exit 1; done
`, strings.Join(socks, " "), q(filepath.Join(c.Bins.Containerd, "ctr"))))

	cmd := exec.Command("bash", "-euo", "pipefail", "-c", block)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the page's Kubernetes commands failed: %v\n%s\n%s", err, out, c.Diagnose())
	}
	// What the page says the logs show.
	for _, want := range []string{"Driver Version:", "CUDA Version:", "0  NVIDIA GeForce RTX 3060 Laptop GPU"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the page's commands printed no %q:\n%s", want, out)
		}
	}
	if node, _ := c.Kubectl("get", "pod", "cuda-check", "-o", "jsonpath={.spec.nodeName}"); node != "laptop" {
		t.Errorf("cuda-check ran on %q, want the NVIDIA laptop", node)
	}
	t.Logf("the page's commands printed:\n%s", out)
}
