package gpumetrics_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/kube/podresources"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/usage/gpumetrics"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/usage/metricsserver"
)

const gpu = "nvidia-2520-3a5c17aa-0"

// longName is the i-th of names alike in their first 200 characters:
// Kubernetes allows 253 in a pod's or a claim's name.
func longName(i int) string {
	return strings.Repeat("a", 200) + fmt.Sprintf("-%04d", i)
}

// kubelet answers List as a kubelet would, on a unix socket.
type kubelet struct {
	podresourcesapi.UnimplementedPodResourcesListerServer
	resp *podresourcesapi.ListPodResourcesResponse
}

func (k kubelet) List(context.Context, *podresourcesapi.ListPodResourcesRequest) (*podresourcesapi.ListPodResourcesResponse, error) {
	return k.resp, nil
}

// serve serves reg as the commands do and returns the /metrics URL.
func serve(t *testing.T, reg prometheus.Gatherer) string {
	t.Helper()
	s, err := metricsserver.Listen(metricsserver.Options{Addr: "127.0.0.1:0", Limits: metricsserver.DefaultLimits(), Log: slog.New(slog.DiscardHandler)}, reg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Start(context.Background()))
	return "http://" + s.Addr().String() + "/metrics"
}

// scrape returns the body of a 200 answer, or fails the test.
func scrape(t *testing.T, url string) string {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: %s: %.300s", resp.Status, body)
	}
	return string(body)
}

// series returns the label sets of metric's series in body, counting
// repeats.
func series(body, metric string) map[string]int {
	out := map[string]int{}
	for _, l := range strings.Split(body, "\n") {
		if rest, ok := strings.CutPrefix(l, metric+"{"); ok {
			labels, _, _ := strings.Cut(rest, "} ")
			out[labels]++
		}
	}
	return out
}

// TestManyPodsAlikeOnOneAdapter: pods whose names share their first 125
// characters, on one adapter (DRA sharing, replicas), made identical
// wsl_gpu_allocation_info series once cut to 128 bytes: the registry
// refused to gather and every scrape of the node answered 500. Any user
// who can create pods could do it. The device plugin's path end to end,
// kubelet to HTTP: 1,000 pods named alike in their first 200 characters
// give 1,000 distinct series, each pod's own.
func TestManyPodsAlikeOnOneAdapter(t *testing.T) {
	const pods = 1000
	resp := &podresourcesapi.ListPodResourcesResponse{}
	for i := range pods {
		resp.PodResources = append(resp.PodResources, &podresourcesapi.PodResources{Name: longName(i), Namespace: "ml",
			Containers: []*podresourcesapi.ContainerResources{{Name: "main", Devices: []*podresourcesapi.ContainerDevices{
				{ResourceName: "nvidia.com/gpu", DeviceIds: []string{fmt.Sprintf("%s::%d", gpu, i)}}}}}})
	}
	sock := filepath.Join(t.TempDir(), "kubelet.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	podresourcesapi.RegisterPodResourcesListerServer(srv, kubelet{resp: resp})
	go srv.Serve(ln)
	defer srv.Stop()

	reg := prometheus.NewRegistry()
	reg.MustRegister(gpumetrics.NewAllocations(func(ctx context.Context) ([]gpumetrics.Allocation, error) {
		as, err := podresources.List(ctx, sock, podresources.Filter{Resources: map[string]bool{"nvidia.com/gpu": true}})
		out := make([]gpumetrics.Allocation, len(as))
		for i, a := range as {
			out[i] = gpumetrics.Allocation(a)
		}
		return out, err
	}, time.Minute))
	got := series(scrape(t, serve(t, reg)), "wsl_gpu_allocation_info")
	if len(got) != pods {
		t.Fatalf("%d distinct allocation series, want %d", len(got), pods)
	}
	podLabel := regexp.MustCompile(`pod="(a{1,200}[^"]*)"`)
	for labels, n := range got {
		if n != 1 {
			t.Errorf("series {%s} served %d times", labels, n)
		}
		if m := podLabel.FindStringSubmatch(labels); m == nil || len(m[1]) > 128 {
			t.Errorf("series {%s}: no pod label of at most 128 bytes that starts as the pod's name", labels)
		}
	}
}

// TestManyClaimsAlike: the DRA driver's wsl_gpu_claim_memory_bytes, with
// claim names alike in their first 200 characters, did the same.
func TestManyClaimsAlike(t *testing.T) {
	const claims = 1000
	reg := prometheus.NewRegistry()
	reg.MustRegister(gpumetrics.NewClaims(func() []gpumetrics.ClaimMemory {
		out := make([]gpumetrics.ClaimMemory, claims)
		for i := range out {
			out[i] = gpumetrics.ClaimMemory{GPU: gpu, Namespace: "ml", Claim: longName(i), Bytes: 1 << 20}
		}
		return out
	}))
	got := series(scrape(t, serve(t, reg)), "wsl_gpu_claim_memory_bytes")
	if len(got) != claims {
		t.Fatalf("%d distinct claim series, want %d", len(got), claims)
	}
}
