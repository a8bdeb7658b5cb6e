package podresources

import (
	"context"
	"net"
	"path/filepath"
	"reflect"
	"testing"

	"google.golang.org/grpc"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// kubelet answers List as a kubelet would, on a unix socket.
type kubelet struct {
	podresourcesapi.UnimplementedPodResourcesListerServer
	resp *podresourcesapi.ListPodResourcesResponse
}

func (k kubelet) List(context.Context, *podresourcesapi.ListPodResourcesRequest) (*podresourcesapi.ListPodResourcesResponse, error) {
	return k.resp, nil
}

func answer() *podresourcesapi.ListPodResourcesResponse {
	return &podresourcesapi.ListPodResourcesResponse{PodResources: []*podresourcesapi.PodResources{
		{Name: "cuda-0", Namespace: "ml", Containers: []*podresourcesapi.ContainerResources{
			{Name: "main", Devices: []*podresourcesapi.ContainerDevices{
				{ResourceName: "nvidia.com/gpu", DeviceIds: []string{"nvidia-2520-3a5c17aa-0::1"}},
				{ResourceName: "example.com/nic", DeviceIds: []string{"eth1"}},
			}},
			{Name: "sidecar"},
		}},
		{Name: "notebook", Namespace: "dev", Containers: []*podresourcesapi.ContainerResources{
			{Name: "jupyter", DynamicResources: []*podresourcesapi.DynamicResource{{
				ClaimName: "gpu", ClaimNamespace: "dev", ClaimResources: []*podresourcesapi.ClaimResource{
					{DriverName: "gpu.wsl-gpu-hook.dev", PoolName: "laptop", DeviceName: "intel-9a49-22d817aa-0"},
					{DriverName: "other.example.com", PoolName: "laptop", DeviceName: "fpga-0"},
				}}}},
		}},
	}}
}

func TestList(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "kubelet.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	podresourcesapi.RegisterPodResourcesListerServer(srv, kubelet{resp: answer()})
	go srv.Serve(ln)
	defer srv.Stop()
	got, err := List(context.Background(), sock, Filter{Resources: map[string]bool{"nvidia.com/gpu": true}, Driver: "gpu.wsl-gpu-hook.dev"})
	if err != nil {
		t.Fatal(err)
	}
	want := []Allocation{
		{GPU: "intel-9a49-22d817aa-0", Namespace: "dev", Pod: "notebook", Container: "jupyter", Source: "claim dev/gpu"},
		{GPU: "nvidia-2520-3a5c17aa-0", Namespace: "ml", Pod: "cuda-0", Container: "main", Source: "nvidia.com/gpu"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("allocations\n%+v\nwant\n%+v", got, want)
	}
}

func TestListWithoutKubelet(t *testing.T) {
	_, err := List(context.Background(), filepath.Join(t.TempDir(), "none.sock"), Filter{})
	if err == nil {
		t.Fatal("no error without a kubelet")
	}
}
