package podresources

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// DefaultSocket is the kubelet's PodResources socket on a node.
const DefaultSocket = "/var/lib/kubelet/pod-resources/kubelet.sock"

// maxMessage bounds the kubelet's answer, as the kubelet's own client
// does (16 MiB).
const maxMessage = 16 << 20

// Allocation is one adapter held by one container.
type Allocation struct {
	// GPU is the adapter's identity: the device plugin's device ID
	// without its replica suffix, or the DRA device's name.
	GPU                       string
	Namespace, Pod, Container string
	// Source says how: the extended resource's name (nvidia.com/gpu) or
	// "claim <namespace>/<name>".
	Source string
}

// Filter says which allocations are the project's: resources are the
// extended resources the device plugin advertises, driver the DRA
// driver's name.
type Filter struct {
	Resources map[string]bool
	Driver    string
}

// List asks the kubelet at socket for every container's resources and
// returns the allocations f keeps, sorted.
func List(ctx context.Context, socket string, f Filter) ([]Allocation, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMessage)))
	if err != nil {
		return nil, fmt.Errorf("pod resources at %s: %w", socket, err)
	}
	defer conn.Close()
	resp, err := podresourcesapi.NewPodResourcesListerClient(conn).List(ctx, &podresourcesapi.ListPodResourcesRequest{})
	if err != nil {
		return nil, fmt.Errorf("pod resources at %s: %w", socket, err)
	}
	return Allocations(resp, f), nil
}

// Allocations picks the project's allocations out of a List answer.
func Allocations(resp *podresourcesapi.ListPodResourcesResponse, f Filter) []Allocation {
	var out []Allocation
	seen := map[Allocation]bool{}
	add := func(a Allocation) {
		if !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	for _, p := range resp.GetPodResources() {
		for _, c := range p.GetContainers() {
			base := Allocation{Namespace: p.GetNamespace(), Pod: p.GetName(), Container: c.GetName()}
			for _, d := range c.GetDevices() {
				if !f.Resources[d.GetResourceName()] {
					continue
				}
				for _, id := range d.GetDeviceIds() {
					a := base
					a.GPU, _, _ = strings.Cut(id, "::") // replicas share the adapter
					a.Source = d.GetResourceName()
					add(a)
				}
			}
			for _, r := range c.GetDynamicResources() {
				for _, cr := range r.GetClaimResources() {
					if cr.GetDriverName() != f.Driver || f.Driver == "" {
						continue
					}
					a := base
					a.GPU = cr.GetDeviceName()
					a.Source = "claim " + r.GetClaimNamespace() + "/" + r.GetClaimName()
					add(a)
				}
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		return a.GPU+"\x00"+a.Namespace+"\x00"+a.Pod+"\x00"+a.Container+"\x00"+a.Source < b.GPU+"\x00"+b.Namespace+"\x00"+b.Pod+"\x00"+b.Container+"\x00"+b.Source
	})
	return out
}
