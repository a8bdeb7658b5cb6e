package driver

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	healthpb "k8s.io/kubelet/pkg/apis/dra-health/v1"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/kube/dra"
)

// The driver behind the kubelet plugin library's real gRPC services, as
// the kubelet calls them: registration, NodePrepareResources and
// NodeUnprepareResources on dra.sock (the library fetches the claim from
// the API), NodeWatchResources for health, and the ResourceSlice the
// library's controller writes to the API (a fake clientset here).
func TestKubeletPluginGRPC(t *testing.T) {
	e := newEnv(t)
	d := e.driver(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	c := claim(uid1, "gpu", nvDev)
	c.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: "p", UID: "0b0b0b0b-0000-4000-8000-000000000002"}}
	client := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, UID: "0c0c0c0c-0000-4000-8000-000000000003"}}, c)
	pluginDir, regDir := filepath.Join(t.TempDir(), "plugin"), t.TempDir()
	os.MkdirAll(pluginDir, 0o750)
	helper, err := kubeletplugin.Start(ctx, d,
		kubeletplugin.DriverName(dra.DriverName), kubeletplugin.NodeName(node), kubeletplugin.KubeClient(client),
		kubeletplugin.PluginDataDirectoryPath(pluginDir), kubeletplugin.RegistrarDirectoryPath(regDir))
	if err != nil {
		t.Fatal(err)
	}
	defer helper.Stop()
	if err := d.SetPublisher(ctx, helper); err != nil {
		t.Fatal(err)
	}

	// The slice in the API.
	sliceDevices := func() string {
		list, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
		if err != nil || len(list.Items) != 1 {
			return ""
		}
		s := list.Items[0]
		if s.Spec.Driver != dra.DriverName || s.Spec.NodeName == nil || *s.Spec.NodeName != node || s.Spec.Pool.Name != node {
			return "wrong slice"
		}
		var out []string
		for _, dev := range s.Spec.Devices {
			n := dev.Name
			for _, tn := range dev.Taints {
				n += "[" + tn.Value + "]"
			}
			out = append(out, n)
		}
		return strings.Join(out, " ")
	}
	waitFor(t, "the slice", func() bool { return sliceDevices() == igDev+" "+nvDev })

	conn, err := grpc.NewClient("unix://"+filepath.Join(pluginDir, "dra.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	node := drapb.NewDRAPluginClient(conn)
	ref := &drapb.Claim{Namespace: "default", Name: "gpu", Uid: uid1}
	prep, err := node.NodePrepareResources(ctx, &drapb.NodePrepareResourcesRequest{Claims: []*drapb.Claim{ref}})
	if err != nil {
		t.Fatal(err)
	}
	r := prep.Claims[uid1]
	if r == nil || r.Error != "" || len(r.Devices) != 1 || r.Devices[0].DeviceName != nvDev || strings.Join(r.Devices[0].CdiDeviceIds, ",") != dra.CDIDevice(uid1, nvDev) {
		t.Fatalf("NodePrepareResources = %v", prep)
	}
	if _, err := os.Stat(filepath.Join(e.cdiDir, dra.SpecFile(uid1))); err != nil {
		t.Errorf("claim spec: %v", err)
	}

	// Health over gRPC: healthy, then unhealthy once the adapter is gone,
	// and the slice tainted.
	// Bounded: a driver that never reports the change fails, not hangs.
	hctx, hcancel := context.WithTimeout(ctx, 20*time.Second)
	defer hcancel()
	stream, err := healthpb.NewDRAResourceHealthClient(conn).NodeWatchResources(hctx, &healthpb.NodeWatchResourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	health := func() map[string]healthpb.HealthStatus {
		resp, err := stream.Recv()
		if err != nil {
			t.Fatalf("health stream: %v", err)
		}
		m := map[string]healthpb.HealthStatus{}
		for _, h := range resp.Devices {
			m[h.Device.DeviceName] = h.Health
		}
		return m
	}
	if h := health(); h[nvDev] != healthpb.HealthStatus_HEALTHY || h[igDev] != healthpb.HealthStatus_HEALTHY {
		t.Errorf("first health report = %v", h)
	}
	e.host.set(removeAdapter(1))
	start := time.Now()
	if _, err := d.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	for h := health(); h[nvDev] != healthpb.HealthStatus_UNHEALTHY; h = health() {
	}
	waitFor(t, "the tainted slice", func() bool {
		return sliceDevices() == nvDev+"["+dra.ReasonGone+"] "+igDev || sliceDevices() == igDev+" "+nvDev+"["+dra.ReasonGone+"]"
	})
	t.Logf("slice tainted %v after the refresh that saw the removal", time.Since(start).Round(time.Millisecond))

	unprep, err := node.NodeUnprepareResources(ctx, &drapb.NodeUnprepareResourcesRequest{Claims: []*drapb.Claim{ref}})
	if err != nil || unprep.Claims[uid1] == nil || unprep.Claims[uid1].Error != "" {
		t.Fatalf("NodeUnprepareResources = %v, %v", unprep, err)
	}
	if _, err := os.Stat(filepath.Join(e.cdiDir, dra.SpecFile(uid1))); !os.IsNotExist(err) {
		t.Errorf("claim spec after unprepare: %v", err)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
