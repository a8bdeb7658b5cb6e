package driver

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/kube/dra"
)

// A stop (SIGTERM ends the command's context: Watch returns and the
// kubelet plugin library's Stop runs) removes no claim spec and leaves the
// checkpoint as it was: the pods holding claims keep running, and their
// containers' next starts need the specs.
func TestStopLeavesFiles(t *testing.T) {
	e := newEnv(t)
	d := e.driver(t)
	ctx, cancel := context.WithCancel(context.Background())
	client := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, UID: "0c0c0c0c-0000-4000-8000-000000000003"}})
	pluginDir := filepath.Join(t.TempDir(), "plugin")
	os.MkdirAll(pluginDir, 0o750)
	helper, err := kubeletplugin.Start(ctx, d,
		kubeletplugin.DriverName(dra.DriverName), kubeletplugin.NodeName(node), kubeletplugin.KubeClient(client),
		kubeletplugin.PluginDataDirectoryPath(pluginDir), kubeletplugin.RegistrarDirectoryPath(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.SetPublisher(ctx, helper); err != nil {
		t.Fatal(err)
	}
	if r := prepare(t, d, claim(uid1, "gpu", nvDev)); r.Err != nil {
		t.Fatal(r.Err)
	}
	spec, _ := os.ReadFile(filepath.Join(e.cdiDir, dra.SpecFile(uid1)))
	ckpt, _ := os.ReadFile(e.ckpt)
	meta, err := os.ReadFile(dra.MetadataFile(e.meta, uid1, "gpu"))
	if err != nil {
		t.Fatal(err)
	}
	watched := make(chan struct{})
	go func() {
		d.Watch(ctx, time.Hour)
		close(watched)
	}()
	cancel()
	<-watched
	helper.Stop()

	if got := e.specs(t); !slices.Equal(got, []string{dra.SpecFile(uid1)}) {
		t.Errorf("CDI dir after a stop = %v, want the claim's spec", got)
	}
	if got, _ := os.ReadFile(filepath.Join(e.cdiDir, dra.SpecFile(uid1))); string(got) != string(spec) {
		t.Errorf("spec changed by a stop")
	}
	if got, _ := os.ReadFile(e.ckpt); string(got) != string(ckpt) {
		t.Errorf("checkpoint changed by a stop")
	}
	if got, _ := os.ReadFile(dra.MetadataFile(e.meta, uid1, "gpu")); string(got) != string(meta) {
		t.Errorf("metadata file changed by a stop")
	}
}

// RemoveAll removes the claims' specs, their metadata files and the
// checkpoint, and the driver forgets the claims: a re-list after it
// writes no file again.
func TestDriverRemoveAll(t *testing.T) {
	e := newEnv(t)
	d := e.driver(t)
	e.prepareTwo(t, d)
	os.WriteFile(filepath.Join(e.cdiDir, "nvidia.yaml"), []byte("kind: nvidia.com/gpu\n"), 0o644)
	if err := d.RemoveAll(); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := e.specs(t); !slices.Equal(got, []string{"nvidia.yaml"}) {
		t.Errorf("CDI dir = %v, want only nvidia.yaml", got)
	}
	if _, err := os.Stat(e.ckpt); !os.IsNotExist(err) {
		t.Errorf("checkpoint after RemoveAll: %v", err)
	}
	if _, err := os.Stat(e.meta); !os.IsNotExist(err) {
		t.Errorf("metadata dir after RemoveAll: %v", err)
	}
}
