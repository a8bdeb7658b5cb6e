package k8s

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/k8s/cluster"
)

// kindTestConfig is what the test adds to docs/kubernetes.md's kind config,
// for this machine, not for a user's: no kindnetd (its Go module is not
// served, so hack/kind/node-image.sh cannot build it; the test does its
// job, see KindHost.RouteNodes), a kubelet that starts on cgroup v1, and
// containerd leaving oom_score_adj as it is (root here lacks
// CAP_SYS_RESOURCE, so runc cannot give the pause container -998).
const kindTestConfig = `networking:
  disableDefaultCNI: true
kubeadmConfigPatches:
- |
  kind: KubeletConfiguration
  failCgroupV1: false
containerdConfigPatches:
- |-
  [plugins."io.containerd.grpc.v1.cri"]
    restrict_oom_score_adj = true
`

// TestKind runs kind itself on a simulated WSL host, through Docker 29
// and through podman (kind's podman provider), as docs/kubernetes.md tells
// a user: the page's kind block (its config with extraMounts, `kind create
// cluster`, `wsl-gpu-ctl doctor --k8s`) and then its chart block (`make
// image`, `kind load image-archive`, `helm install`, the nvidia-smi pod),
// each run as written. Then, on the two-node cluster: a pod asking
// nvidia.com/gpu: 1 and one with a DRA claim open /dev/dxg, see only the
// NVIDIA folder and a read-only lib dir, and get cuInit = 0; a Windows
// driver update (a new folder) under the running cluster reaches new pods
// with no step; `kind delete cluster` leaves the host as it was.
//
// What the test supplies: the node image, made offline by kind's own
// builder (hack/kind/node-image.sh) and given to `kind create cluster` with
// --image (kind's default names a registry's digest); kindTestConfig; the
// pods' network (RouteNodes); the nvidia/cuda image, a stand-in loaded with
// `kind load image-archive`. It does not run in parallel: the chart block's
// `make image` writes bin/ in the repository, as TestK8s/README's does.
func TestKind(t *testing.T) {
	if testing.Short() {
		t.Skip("runs kind clusters")
	}
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	scratch := t.TempDir()
	bins, err := cluster.Build(filepath.Join(scratch, "bin"))
	if err != nil {
		t.Fatal(err)
	}
	ctl := filepath.Join(scratch, "bin", "wsl-gpu-ctl")
	if err := cluster.GoBuild(root, ctl, "./cmd/wsl-gpu-ctl"); err != nil {
		t.Fatal(err)
	}
	page := filepath.Join(root, "docs", "kubernetes.md")
	kindBlock := readmeBlock(t, page, "### kind")
	chartBlock := readmeBlock(t, page, "## Installing the chart")
	images := filepath.Join(scratch, "images")
	test, err := cluster.WriteTestImage(bins, images)
	if err != nil {
		t.Fatal(err)
	}
	const cudaImage = "nvidia/cuda:12.6.3-base-ubuntu24.04"
	if !strings.Contains(chartBlock, "image: "+cudaImage) {
		t.Fatalf("the page's pod no longer runs %s: change the stand-in here with it", cudaImage)
	}
	cuda, err := cluster.WriteStandIn(bins, images, cudaImage, []string{"/usr/bin", "/usr/sbin", "/usr/local/sbin"},
		[]string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"})
	if err != nil {
		t.Fatal(err)
	}
	const create = "kind create cluster --config kind-gpu.yaml"
	if !strings.Contains(kindBlock, create+"\n") || !strings.Contains(kindBlock, "\nEOF\n") {
		t.Fatalf("the page's kind block no longer runs %q with its config in a heredoc: change the test with it:\n%s", create, kindBlock)
	}
	kindBlock = strings.Replace(kindBlock, create+"\n", create+" --image "+cluster.KindNodeImage+"\n", 1)
	kindBlock = strings.Replace(kindBlock, "\nEOF\n", "\n"+kindTestConfig+"EOF\n", 1)

	for _, engine := range []string{cluster.EngineDocker, cluster.EnginePodman} {
		t.Run(engine, func(t *testing.T) {
			folders := filepath.Join(scratch, engine+"-folders")
			h := cluster.StartKindHost(t, bins, cluster.KindSpec{Name: "kind-" + engine, Engine: engine, Profile: "nvidia-laptop",
				DxgsimArgs: []string{"--folder-file", folders}})
			if err := h.LoadNodeImage(); err != nil {
				t.Fatal(err)
			}
			if err := os.Link(ctl, filepath.Join(h.Dir, "bin", "wsl-gpu-ctl")); err != nil {
				t.Fatal(err)
			}
			before := h.State()
			work := filepath.Join(h.Dir, "work")
			os.MkdirAll(work, 0o755)
			begin := time.Now()
			out, err := h.Run(nil, work, "bash", "-euo", "pipefail", "-c", kindBlock)
			if err != nil {
				t.Fatalf("the page's kind block: %v\n%s", err, h.Diagnose())
			}
			t.Logf("kind block (create: %s):\n%s", time.Since(begin).Round(time.Second), out)
			for _, want := range []string{"ok    kind-worker dxg: ", "ok    kind-worker /usr/lib/wsl: mounted read-only",
				"ok    kind-control-plane /usr/lib/wsl: mounted read-only", "warn  kind-worker chart: the chart is not installed"} {
				if !strings.Contains(out, want) {
					t.Errorf("wsl-gpu-ctl doctor --k8s printed no %q", want)
				}
			}
			if err := h.RouteNodes(); err != nil {
				t.Fatal(err)
			}
			h.Wait(t, 3*time.Minute, "both kind nodes Ready", func() bool {
				out, _ := h.Kubectl("get", "nodes", "-o", `jsonpath={.items[*].status.conditions[?(@.type=="Ready")].status}`)
				return out == "True True"
			})
			for _, img := range []string{test, cuda} {
				if out, err := h.Kind("load", "image-archive", img); err != nil {
					t.Fatalf("%v\n%s", err, out)
				}
			}
			begin = time.Now()
			out, err = h.Run(nil, root, "bash", "-euo", "pipefail", "-c", chartBlock)
			if err != nil {
				t.Fatalf("the page's chart block: %v\n%s", err, h.Diagnose())
			}
			t.Logf("chart block (%s):\n%s", time.Since(begin).Round(time.Second), out)
			if !strings.Contains(out, "0  NVIDIA GeForce RTX 3060 Laptop GPU") {
				t.Errorf("the chart block printed no nvidia-smi row for the laptop's GPU")
			}
			if out, err := h.Run(nil, "", "wsl-gpu-ctl", "doctor", "--k8s"); err != nil || !strings.Contains(out, "ok    kind-worker chart: the chart has set it up") {
				t.Errorf("doctor --k8s with the chart installed: %v\n%s", err, out)
			}
			x := tc{t, h}
			h.Apply(pod("kind-cuda", "nvidia.com/gpu", 1))
			checkCUDA(t, x.waitChecks("kind-cuda"), nvidiaFolder)

			if out, err := h.Run(nil, root, "helm", "upgrade", "wsl-gpu-hook", "deploy/helm/wsl-gpu-hook", "-n", ns, "--reuse-values",
				"--set", "dra.enabled=true", "--wait", "--timeout", "5m"); err != nil {
				t.Fatalf("helm upgrade with DRA: %v\n%s", err, out)
			}
			h.Apply(claimTemplate("nvidia", draDriver, nvSel, 1))
			h.Apply(draPod("kind-claim", "resourceClaimTemplateName: nvidia"))
			checkCUDA(t, x.waitChecks("kind-claim"), nvidiaFolder)

			updateNVIDIADriver(t, h.HostTree, folders)
			h.Apply(pod("after-update", "nvidia.com/gpu", 1))
			checkCUDA(t, x.waitChecks("after-update"), updated)
			if out, _ := h.Kubectl("get", "pod", "kind-cuda", "-o", "jsonpath={.status.phase}"); out != "Running" {
				t.Errorf("the pod started before the update is %q, want Running", out)
			}
			drivers := filepath.Join(h.HostTree, "usr/lib/wsl/drivers")
			os.Rename(filepath.Join(drivers, updated), filepath.Join(drivers, nvidiaFolder))
			os.Remove(folders)

			if out, err := h.Run(nil, root, "helm", "uninstall", "wsl-gpu-hook", "-n", ns, "--wait", "--timeout", "3m"); err != nil {
				t.Errorf("helm uninstall: %v\n%s", err, out)
			}
			if out, err := h.Kind("delete", "cluster"); err != nil {
				t.Fatalf("kind delete cluster: %v\n%s", err, out)
			}
			if gone, added := lineDiff(before, h.State()); len(gone)+len(added) > 0 {
				t.Errorf("kind delete cluster left the host changed:\ngone:\n%s\nadded:\n%s", strings.Join(gone, "\n"), strings.Join(added, "\n"))
			}
		})
	}
}

// lineDiff returns the lines only in a and those only in b.
func lineDiff(a, b string) (onlyA, onlyB []string) {
	count := map[string]int{}
	for _, l := range strings.Split(a, "\n") {
		count[l]++
	}
	for _, l := range strings.Split(b, "\n") {
		count[l]--
	}
	for l, n := range count {
		for ; n > 0; n-- {
			onlyA = append(onlyA, l)
		}
		for ; n < 0; n++ {
			onlyB = append(onlyB, l)
		}
	}
	sort.Strings(onlyA)
	sort.Strings(onlyB)
	return onlyA, onlyB
}
