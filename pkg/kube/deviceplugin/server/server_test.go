package server

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/config"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/driverstore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/dxcore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/kube/deviceplugin"
)

// fakeKubelet is the kubelet's side of the protocol: it accepts
// registrations, dials each plugin back and follows its ListAndWatch.
type fakeKubelet struct {
	pluginapi.UnimplementedRegistrationServer
	dir string
	srv *grpc.Server

	mu      sync.Mutex
	regs    []*pluginapi.RegisterRequest
	latest  map[string][]*pluginapi.Device // by resource
	clients map[string]pluginapi.DevicePluginClient
}

func startKubelet(t *testing.T, dir string, k *fakeKubelet) *fakeKubelet {
	t.Helper()
	if k == nil {
		k = &fakeKubelet{dir: dir, latest: map[string][]*pluginapi.Device{}, clients: map[string]pluginapi.DevicePluginClient{}}
	}
	l, err := net.Listen("unix", filepath.Join(dir, "kubelet.sock"))
	if err != nil {
		t.Fatal(err)
	}
	k.srv = grpc.NewServer()
	pluginapi.RegisterRegistrationServer(k.srv, k)
	go k.srv.Serve(l)
	return k
}

// restart does what a restarting kubelet does to the dir: every socket
// goes, then kubelet.sock comes back.
func (k *fakeKubelet) restart(t *testing.T) {
	k.srv.Stop()
	ents, _ := os.ReadDir(k.dir)
	for _, e := range ents {
		os.Remove(filepath.Join(k.dir, e.Name()))
	}
	startKubelet(t, k.dir, k)
}

func (k *fakeKubelet) Register(_ context.Context, r *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	conn, err := grpc.NewClient("unix://"+filepath.Join(k.dir, r.Endpoint), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	c := pluginapi.NewDevicePluginClient(conn)
	stream, err := c.ListAndWatch(context.Background(), &pluginapi.Empty{})
	if err != nil {
		return nil, err
	}
	k.mu.Lock()
	k.regs = append(k.regs, r)
	k.clients[r.ResourceName] = c
	k.mu.Unlock()
	go func() {
		for {
			resp, err := stream.Recv()
			if err != nil {
				return
			}
			k.mu.Lock()
			k.latest[r.ResourceName] = resp.Devices
			k.mu.Unlock()
		}
	}()
	return &pluginapi.Empty{}, nil
}

// waitFor polls cond until it holds or fails the test after 10s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (k *fakeKubelet) registrations(resource string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	n := 0
	for _, r := range k.regs {
		if r.ResourceName == resource && r.Version == pluginapi.Version {
			n++
		}
	}
	return n
}

func (k *fakeKubelet) health(resource string) string {
	k.mu.Lock()
	defer k.mu.Unlock()
	var s []string
	for _, d := range k.latest[resource] {
		s = append(s, d.ID+"="+d.Health)
	}
	return strings.Join(s, " ")
}

// fakeHost answers List with a laptop: Intel iGPU and NVIDIA dGPU.
type fakeHost struct {
	mu       sync.Mutex
	err      error
	nvBroken bool
}

func (h *fakeHost) list() (*driverstore.Inventory, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err != nil {
		return nil, h.err
	}
	nv := driverstore.Adapter{Vendor: driverstore.NVIDIA, Folder: "nvltwi.inf_amd64_7b2a5c1c4e6f8d90", Adapter: dxcore.Adapter{
		Index: 1, LUID: dxcore.LUID{Low: 0x4486d1}, PCI: dxcore.PCIIDs{Vendor: 0x10de, Device: 0x2520},
		DriverStorePath: `C:\Windows\System32\DriverStore\FileRepository\nvltwi.inf_amd64_7b2a5c1c4e6f8d90`}}
	if h.nvBroken {
		nv.Folder, nv.Err = "", errors.New("driver store folder gone")
	}
	return &driverstore.Inventory{LibDir: "/l", DriversDir: "/d", Adapters: []driverstore.Adapter{
		{Vendor: driverstore.Intel, Folder: "iigd_dch.inf_amd64_ba2ab4a3e0e0b2ea", Adapter: dxcore.Adapter{
			Index: 0, LUID: dxcore.LUID{Low: 0x1a1d77}, PCI: dxcore.PCIIDs{Vendor: 0x8086, Device: 0x9a49},
			DriverStorePath: `\SystemRoot\System32\DriverStore\FileRepository\iigd_dch.inf_amd64_ba2ab4a3e0e0b2ea`}},
		nv,
	}}, nil
}

func (h *fakeHost) set(f func(*fakeHost)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f(h)
}

// syncBuffer is a log sink the test reads while the manager writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func startManager(t *testing.T, dir string, h *fakeHost) (*syncBuffer, string) {
	t.Helper()
	logs := &syncBuffer{}
	features := filepath.Join(t.TempDir(), "features.d", "wsl-gpu-hook")
	opt := deviceplugin.Options{Resources: deviceplugin.OptionsFrom(config.Default()).Resources, Replicas: 1, CDI: true, RequestEnv: "WSL_GPU_DEVICES"}
	m := New(Config{PluginDir: dir, Options: opt, Interval: 50 * time.Millisecond, FeatureFile: features, List: h.list,
		Log: slog.New(slog.NewTextHandler(logs, nil))})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		if ents, _ := filepath.Glob(filepath.Join(dir, "wsl-gpu-hook-*")); len(ents) != 0 {
			t.Errorf("sockets left behind: %v", ents)
		}
	})
	return logs, features
}

// shortDir is a temp dir with a path short enough for unix sockets.
func shortDir(t *testing.T) string {
	dir, err := os.MkdirTemp("", "dp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

const nvID = "nvidia-2520-00000000-0"

func TestRegisterWatchAllocate(t *testing.T) {
	dir := shortDir(t)
	k := startKubelet(t, dir, nil)
	h := &fakeHost{}
	logs, features := startManager(t, dir, h)

	waitFor(t, "both resources registered", func() bool {
		return k.registrations("nvidia.com/gpu") == 1 && k.registrations("gpu.intel.com/dxg") == 1
	})
	waitFor(t, "the NVIDIA device healthy", func() bool { return k.health("nvidia.com/gpu") == nvID+"=Healthy" })

	k.mu.Lock()
	c := k.clients["nvidia.com/gpu"]
	k.mu.Unlock()
	resp, err := c.Allocate(context.Background(), &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{nvID}}}})
	if err != nil {
		t.Fatal(err)
	}
	cr := resp.ContainerResponses[0]
	if len(cr.CdiDevices) != 1 || cr.CdiDevices[0].Name != "nvidia.com/gpu=0" {
		t.Errorf("CDI devices %v, want nvidia.com/gpu=0", cr.CdiDevices)
	}
	if len(cr.Devices) != 1 || cr.Devices[0].ContainerPath != "/dev/dxg" || cr.Envs["WSL_GPU_DEVICES"] != "0x4486d1" {
		t.Errorf("devices %v env %v", cr.Devices, cr.Envs)
	}
	if len(cr.Mounts) != 2 || cr.Mounts[1].HostPath != "/usr/lib/wsl/drivers/nvltwi.inf_amd64_7b2a5c1c4e6f8d90" || !cr.Mounts[1].ReadOnly {
		t.Errorf("mounts %v", cr.Mounts)
	}

	h.set(func(h *fakeHost) { h.nvBroken = true })
	waitFor(t, "the NVIDIA device unhealthy", func() bool { return k.health("nvidia.com/gpu") == nvID+"=Unhealthy" })
	if _, err := c.Allocate(context.Background(), &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{nvID}}}}); err == nil {
		t.Error("Allocate of an unhealthy device succeeded")
	}
	h.set(func(h *fakeHost) { h.nvBroken = false })
	waitFor(t, "the NVIDIA device healthy again", func() bool { return k.health("nvidia.com/gpu") == nvID+"=Healthy" })
	if !strings.Contains(logs.String(), "unhealthy: driver store folder gone") {
		t.Errorf("log does not say why the device turned unhealthy:\n%s", logs)
	}

	k.restart(t)
	waitFor(t, "registered again after the kubelet restart", func() bool {
		return k.registrations("nvidia.com/gpu") == 2 && k.registrations("gpu.intel.com/dxg") == 2
	})
	waitFor(t, "devices listed to the new kubelet", func() bool { return k.health("nvidia.com/gpu") == nvID+"=Healthy" })

	data, err := os.ReadFile(features)
	if err != nil || !strings.Contains(string(data), "wsl-gpu-hook.nvidia.count=1\n") {
		t.Errorf("feature file: %v\n%s", err, data)
	}
}

// A host without /dev/dxg: no resource, no crash, the reason in the log,
// and the GPUs are advertised once they appear.
func TestNoDeviceThenDevice(t *testing.T) {
	dir := shortDir(t)
	k := startKubelet(t, dir, nil)
	h := &fakeHost{err: dxcore.ErrNoDevice}
	logs, features := startManager(t, dir, h)
	waitFor(t, "the reason logged", func() bool { return strings.Contains(logs.String(), "not a WSL2 VM") })
	time.Sleep(200 * time.Millisecond)
	if n := k.registrations("nvidia.com/gpu"); n != 0 {
		t.Errorf("registered %d times with no /dev/dxg", n)
	}
	if data, _ := os.ReadFile(features); !strings.Contains(string(data), "wsl-gpu-hook.present=false") {
		t.Errorf("feature file with no device:\n%s", data)
	}
	h.set(func(h *fakeHost) { h.err = nil })
	waitFor(t, "registered once the device appears", func() bool { return k.registrations("nvidia.com/gpu") == 1 })
}

// The plugin starts before the kubelet: it registers once the kubelet is up.
func TestKubeletLate(t *testing.T) {
	dir := shortDir(t)
	logs, _ := startManager(t, dir, &fakeHost{})
	waitFor(t, "a failed registration logged", func() bool { return strings.Contains(logs.String(), "not registered yet") })
	k := startKubelet(t, dir, nil)
	waitFor(t, "registered", func() bool { return k.registrations("nvidia.com/gpu") == 1 })
}

// TestHoldWithNoDevice: with every vendor's resource turned off (the
// chart's dra.enabled), a held resource is still registered, with no
// device, and again after a kubelet restart: the kubelet keeps its
// endpoint for the pods that hold it or that DRA serves under its name.
func TestHoldWithNoDevice(t *testing.T) {
	dir := shortDir(t)
	k := startKubelet(t, dir, nil)
	opt := deviceplugin.Options{Resources: map[driverstore.Vendor]string{}, Replicas: 1, CDI: true}
	m := New(Config{PluginDir: dir, Options: opt, Interval: 50 * time.Millisecond, List: (&fakeHost{}).list,
		Hold: []string{"nvidia.com/gpu", "amd.com/gpu"}, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	listed := func(resource string) bool {
		k.mu.Lock()
		defer k.mu.Unlock()
		devs, ok := k.latest[resource]
		return ok && len(devs) == 0
	}
	waitFor(t, "both held resources registered with no device", func() bool {
		return k.registrations("nvidia.com/gpu") == 1 && k.registrations("amd.com/gpu") == 1 && listed("nvidia.com/gpu") && listed("amd.com/gpu")
	})
	time.Sleep(200 * time.Millisecond)
	if n := k.registrations("gpu.intel.com/dxg"); n != 0 {
		t.Errorf("a resource neither planned nor held registered %d times", n)
	}
	k.restart(t)
	waitFor(t, "registered again after the kubelet restart", func() bool { return k.registrations("nvidia.com/gpu") == 2 })
}
