package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/kube/deviceplugin"
)

// resourceServer serves one extended resource on its own socket.
type resourceServer struct {
	pluginapi.UnimplementedDevicePluginServer
	resource string
	sock     string
	mgr      *Manager
	srv      *grpc.Server

	mu         sync.Mutex
	devices    []*pluginapi.Device
	watchers   map[chan []*pluginapi.Device]struct{}
	registered bool
	// lastErr is the last registration error logged: a kubelet that is
	// not up yet is logged once, not at every retry.
	lastErr string
}

// socketName is the plugin's socket file for resource, inside the
// kubelet's device-plugins dir.
func socketName(resource string) string {
	return "wsl-gpu-hook-" + strings.NewReplacer("/", "_", ".", "-").Replace(resource) + ".sock"
}

func newResourceServer(m *Manager, resource string) *resourceServer {
	return &resourceServer{
		resource: resource,
		sock:     filepath.Join(m.cfg.PluginDir, socketName(resource)),
		mgr:      m,
		watchers: map[chan []*pluginapi.Device]struct{}{},
	}
}

// start listens on the socket, replacing a stale one, and serves.
func (s *resourceServer) start() error {
	if err := os.Remove(s.sock); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove stale socket: %w", err)
	}
	l, err := net.Listen("unix", s.sock)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", s.sock, err)
	}
	s.srv = grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(s.srv, s)
	go s.srv.Serve(l)
	return nil
}

// stop ends the server and every ListAndWatch stream, and removes the socket.
func (s *resourceServer) stop() {
	if s.srv != nil {
		s.srv.Stop()
		s.srv = nil
	}
	os.Remove(s.sock)
	s.mu.Lock()
	s.registered = false
	s.mu.Unlock()
}

// register tells the kubelet about this resource and where to call back.
func (s *resourceServer) register(ctx context.Context) error {
	kubelet := filepath.Join(s.mgr.cfg.PluginDir, filepath.Base(pluginapi.KubeletSocket))
	conn, err := grpc.NewClient("unix://"+kubelet, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("connect to the kubelet at %s: %w", kubelet, err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{
		Version:      pluginapi.Version,
		Endpoint:     filepath.Base(s.sock),
		ResourceName: s.resource,
		Options:      &pluginapi.DevicePluginOptions{},
	})
	if err != nil {
		return fmt.Errorf("register %s with the kubelet at %s: %w", s.resource, kubelet, err)
	}
	s.mu.Lock()
	s.registered = true
	s.mu.Unlock()
	return nil
}

func (s *resourceServer) isRegistered() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.registered
}

// update sets the device list every ListAndWatch stream sends next.
func (s *resourceServer) update(devs []deviceplugin.Device) {
	list := make([]*pluginapi.Device, 0, len(devs))
	for _, d := range devs {
		h := pluginapi.Healthy
		if !d.Healthy {
			h = pluginapi.Unhealthy
		}
		list = append(list, &pluginapi.Device{ID: d.ID, Health: h})
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.devices = list
	for ch := range s.watchers {
		select {
		case <-ch: // drop a list the stream has not sent yet
		default:
		}
		ch <- list
	}
}

func (s *resourceServer) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{}, nil
}

// ListAndWatch sends the device list now and after every change.
func (s *resourceServer) ListAndWatch(_ *pluginapi.Empty, stream grpc.ServerStreamingServer[pluginapi.ListAndWatchResponse]) error {
	ch := make(chan []*pluginapi.Device, 1)
	s.mu.Lock()
	ch <- s.devices
	s.watchers[ch] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.watchers, ch)
		s.mu.Unlock()
	}()
	for {
		select {
		case <-stream.Context().Done():
			return nil
		case list := <-ch:
			if err := stream.Send(&pluginapi.ListAndWatchResponse{Devices: list}); err != nil {
				return err
			}
		}
	}
}

// Allocate answers each container's request from the current plan.
func (s *resourceServer) Allocate(_ context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	plan, opt := s.mgr.current()
	resp := &pluginapi.AllocateResponse{}
	for _, cr := range req.ContainerRequests {
		r, err := plan.Allocate(s.resource, cr.DevicesIds, opt)
		if err != nil {
			s.mgr.log.Warn("allocate refused", "resource", s.resource, "devices", cr.DevicesIds, "err", err)
			return nil, status.Error(codes.FailedPrecondition, err.Error())
		}
		resp.ContainerResponses = append(resp.ContainerResponses, toAPI(r))
		s.mgr.log.Info("allocated", "resource", s.resource, "devices", cr.DevicesIds, "cdi", r.CDIDevices)
	}
	return resp, nil
}

func (s *resourceServer) PreStartContainer(context.Context, *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	return &pluginapi.PreStartContainerResponse{}, nil
}

func toAPI(r *deviceplugin.Response) *pluginapi.ContainerAllocateResponse {
	out := &pluginapi.ContainerAllocateResponse{Envs: r.Env}
	for _, n := range r.CDIDevices {
		out.CdiDevices = append(out.CdiDevices, &pluginapi.CDIDevice{Name: n})
	}
	for _, d := range r.Devices {
		out.Devices = append(out.Devices, &pluginapi.DeviceSpec{HostPath: d.HostPath, ContainerPath: d.ContainerPath, Permissions: d.Permissions})
	}
	for _, m := range r.Mounts {
		out.Mounts = append(out.Mounts, &pluginapi.Mount{HostPath: m.HostPath, ContainerPath: m.ContainerPath, ReadOnly: true})
	}
	return out
}
