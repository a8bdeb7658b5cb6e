package k8s

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/k8s/cluster"
)

// env is what the suites share: one cluster, and the laptop's dxgsim
// fault files (driver folder names, removed adapters).
type env struct {
	c                       *cluster.Cluster
	folders, removed, luids string
}

// TestK8s starts one four-node cluster (the NVIDIA laptop, an AMD desktop,
// an Intel host with an NPU, a WSL node without /dev/dxg) with `make
// image`'s image on every node, and runs each suite on it in turn: starting
// a cluster and building the image once instead of per suite. A suite
// leaves the cluster as it found it (its release uninstalled, its pods and
// claims deleted, the simulated hosts restored), which each suite checks
// first, so `-run TestK8s/DRA` alone or any order works.
func TestK8s(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a cluster")
	}
	// Its own cluster, names and dirs: it overlaps the other cluster test,
	// which spends most of its time waiting on pods, not on the CPU.
	t.Parallel()
	scratch := t.TempDir()
	archive := makeImage(t, scratch)
	e := env{folders: filepath.Join(scratch, "laptop-folders"), removed: filepath.Join(scratch, "laptop-removed"),
		luids: filepath.Join(scratch, "laptop-luids")}
	e.c = cluster.Start(t, cluster.Options{Images: []string{archive}, Nodes: []cluster.NodeSpec{
		{Name: "laptop", Profile: "nvidia-laptop", DxgsimArgs: []string{"--folder-file", e.folders, "--removed-file", e.removed, "--luid-file", e.luids}},
		{Name: "amd", Profile: "amd-desktop"},
		{Name: "npu", Profile: "intel-npu"},
		{Name: "nodxg", Profile: "nvidia-laptop", NoDxg: true},
	}})
	for _, s := range []struct {
		name string
		run  func(*testing.T, env)
	}{
		{"README", testREADME},
		{"WSLGPU", testWSLGPU},
		{"DRA", testDRA},
		{"Operation", testOperation},
		{"Metrics", testMetrics},
	} {
		t.Run(s.name, func(t *testing.T) {
			begin := time.Now()
			e.pristine(t)
			t.Cleanup(func() { e.restore(t) })
			s.run(t, e)
			t.Logf("%s: %s", s.name, time.Since(begin).Round(time.Second))
		})
	}
}

// pristine fails t unless the cluster is as a new one: no release, no
// pods or claims in default, no chart labels, the laptop's driver folder
// and adapters as the profile has them.
func (e env) pristine(t *testing.T) {
	c := e.c.For(t)
	if out, _ := c.Helm("list", "-A", "-q"); strings.TrimSpace(out) != "" {
		t.Fatalf("a release is installed before the suite: %s", out)
	}
	if out, _ := c.Kubectl("get", "pods,resourceclaims,resourceclaimtemplates,deployments", "-o", "name"); out != "" {
		t.Fatalf("objects left in default before the suite:\n%s", out)
	}
	if out, _ := c.Kubectl("get", "nodes", "-o", "jsonpath={.items[*].metadata.labels}"); strings.Contains(out, `"wsl-gpu-hook.dev/wsl"`) {
		t.Fatalf("node labels of the chart before the suite: %s", out)
	}
	if _, err := os.Stat(filepath.Join(c.Node("laptop").HostTree, "usr/lib/wsl/drivers", nvidiaFolder)); err != nil {
		t.Fatalf("the laptop's driver folder: %v", err)
	}
}

// restore puts back what a suite may have changed, also when it failed
// half-way: default's objects deleted, the release uninstalled, the
// laptop's driver folder and fault files as at the start. The objects go
// first: a pod with a prepared claim finishes terminating only once the
// kubelet has had the DRA driver unprepare it, so with the release gone
// first the pod and its claim would stay, Terminating, into the next
// suite. What it cannot remove fails the suite that left it.
func (e env) restore(t *testing.T) {
	c := e.c.For(t)
	const objects = "pods,resourceclaims,resourceclaimtemplates,deployments"
	if out, err := c.Kubectl("delete", objects, "--all", "--wait=true", "--timeout=2m"); err != nil {
		t.Errorf("cleanup: kubectl delete %s --all: %v\n%s", objects, err, out)
	}
	if out, _ := c.Helm("list", "-A", "-q"); strings.Contains(out, "wsl-gpu-hook") {
		if out, err := c.Helm("uninstall", "wsl-gpu-hook", "-n", ns, "--wait", "--timeout", "3m"); err != nil {
			t.Errorf("cleanup: helm uninstall: %v\n%s", err, out)
		}
	}
	if out, _ := c.Kubectl("get", objects, "-o", "name"); out != "" {
		t.Errorf("cleanup: objects left in default for the next suite:\n%s", out)
	}
	drivers := filepath.Join(c.Node("laptop").HostTree, "usr/lib/wsl/drivers")
	for _, moved := range []string{updated, nvidiaFolder + ".gone"} {
		if _, err := os.Stat(filepath.Join(drivers, moved)); err == nil {
			os.Rename(filepath.Join(drivers, moved), filepath.Join(drivers, nvidiaFolder))
		}
	}
	amd := filepath.Join(c.Node("amd").HostTree, "usr/lib/wsl/drivers", amdFolder)
	if _, err := os.Stat(amd + ".gone"); err == nil {
		os.Rename(amd+".gone", amd)
	}
	os.Remove(e.folders)
	os.Remove(e.removed)
	os.Remove(e.luids)
}
