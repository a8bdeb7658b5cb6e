package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/driverstore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/kube/deviceplugin"
)

// Config is what a Manager needs.
type Config struct {
	// PluginDir is the kubelet's device-plugins dir, holding kubelet.sock.
	PluginDir string
	Options   deviceplugin.Options
	// Interval between re-enumerations; the drivers dir's changes also
	// trigger one.
	Interval time.Duration
	// FeatureFile is the node-feature-discovery file to keep current; ""
	// writes none.
	FeatureFile string
	// List lists the adapters (dxcore.Enumerate and driverstore.Build on a
	// real host).
	List func() (*driverstore.Inventory, error)
	Log  *slog.Logger
	// OnInventory, if set, gets every listing (nil when the adapters
	// cannot be listed), outside the manager's lock: the node labeler.
	OnInventory func(*driverstore.Inventory)
	// Hold are resources registered even when the plan has no device for
	// them (the chart's names with dra.enabled, where the plugin
	// advertises nothing). The kubelet keeps the endpoint of a resource
	// whose last plugin went away for 5 minutes only; after that it
	// refuses every container start of a pod that holds the resource from
	// before (the device plugin's, before a switch to DRA) and, while its
	// allocations of the resource are remembered, of pods the DRA driver
	// serves under the same name (a DeviceClass's extendedResourceName):
	// "endpoint not found in cache for a registered resource". Registered
	// with no device, the resource's allocatable is 0, which is what sends
	// the scheduler to DRA for it.
	Hold []string
}

// Manager keeps the kubelet's view of the GPUs current.
type Manager struct {
	cfg Config
	log *slog.Logger

	mu      sync.Mutex
	plan    *deviceplugin.Plan
	servers map[string]*resourceServer
	problem string
	feature []byte
}

// New returns a Manager; Run starts it.
func New(cfg Config) *Manager {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 30 * time.Second
	}
	return &Manager{cfg: cfg, log: cfg.Log, servers: map[string]*resourceServer{}}
}

func (m *Manager) current() (*deviceplugin.Plan, deviceplugin.Options) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.plan, m.cfg.Options
}

// debounce lets a burst of drivers-dir events (a driver update replaces a
// whole folder) cost one re-enumeration.
const debounce = 300 * time.Millisecond

// Run serves until ctx ends, then stops every server and removes its
// sockets. It returns an error only when it cannot watch the plugin dir.
func (m *Manager) Run(ctx context.Context) error {
	if err := os.MkdirAll(m.cfg.PluginDir, 0o750); err != nil {
		return fmt.Errorf("device plugin dir: %w", err)
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("inotify: %w", err)
	}
	defer w.Close()
	if err := w.Add(m.cfg.PluginDir); err != nil {
		return fmt.Errorf("watch %s: %w", m.cfg.PluginDir, err)
	}
	drivers := orDefault(m.cfg.Options.DriversDir, driverstore.DefaultDriversDir)
	watchingDrivers := m.watchDrivers(w, drivers)
	defer m.stopAll()

	m.refresh(ctx)
	tick := time.NewTicker(m.cfg.Interval)
	defer tick.Stop()
	var settle <-chan time.Time
	kubeletSock := filepath.Join(m.cfg.PluginDir, filepath.Base(pluginapi.KubeletSocket))
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			if !watchingDrivers {
				watchingDrivers = m.watchDrivers(w, drivers)
			}
			m.refresh(ctx)
		case <-settle:
			settle = nil
			m.refresh(ctx)
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			switch {
			case ev.Name == kubeletSock && ev.Has(fsnotify.Create):
				m.log.Info("the kubelet restarted (kubelet.sock recreated): registering again")
				m.restartAll(ctx)
			case filepath.Dir(ev.Name) == m.cfg.PluginDir:
				// Other plugins' sockets and the kubelet's checkpoint.
			default:
				if ev.Name == drivers && ev.Has(fsnotify.Remove) {
					watchingDrivers = false
				}
				settle = time.After(debounce)
			}
		case err := <-w.Errors:
			m.log.Warn("inotify", "err", err)
		}
	}
}

// watchDrivers watches the drivers dir, which may not exist yet; the
// interval covers what inotify cannot see (WSL's mount of the Windows
// driver store reports no events for changes made on the Windows side).
func (m *Manager) watchDrivers(w *fsnotify.Watcher, dir string) bool {
	if err := w.Add(dir); err != nil {
		m.log.Debug("not watching the drivers dir", "dir", dir, "err", err)
		return false
	}
	return true
}

// refresh lists the adapters, updates the plan, the servers and the
// feature file, and registers servers the kubelet does not know yet.
func (m *Manager) refresh(ctx context.Context) {
	inv, err := m.cfg.List()
	m.mu.Lock()
	prev := m.plan
	plan := deviceplugin.Build(inv, err, prev, m.cfg.Options)
	m.plan = plan
	if plan.Problem != m.problem {
		m.problem = plan.Problem
		if plan.Problem != "" {
			m.log.Warn("no GPU adapters can be listed; advertising none until they can", "reason", plan.Problem)
		} else {
			m.log.Info("GPU adapters listed")
		}
	}
	for _, c := range prev.Changes(plan) {
		m.log.Info(c)
	}
	resources := plan.Resources()
	for _, res := range m.cfg.Hold {
		if !slices.Contains(resources, res) {
			resources = append(resources, res)
		}
	}
	for _, res := range resources {
		s, ok := m.servers[res]
		if !ok {
			s = newResourceServer(m, res)
			m.servers[res] = s
		}
		s.update(plan.For(res))
	}
	servers := make([]*resourceServer, 0, len(m.servers))
	for _, s := range m.servers {
		servers = append(servers, s)
	}
	m.mu.Unlock()

	for _, s := range servers {
		if s.srv == nil {
			if err := s.start(); err != nil {
				m.log.Error("cannot serve; retrying", "resource", s.resource, "err", err)
				continue
			}
		}
		if !s.isRegistered() {
			if err := s.register(ctx); err != nil {
				if err.Error() != s.lastErr {
					m.log.Warn("not registered yet; retrying every interval", "err", err)
				}
				s.lastErr = err.Error()
			} else {
				s.lastErr = ""
				m.log.Info("registered with the kubelet", "resource", s.resource, "socket", s.sock, "devices", len(plan.For(s.resource)))
			}
		}
	}
	m.writeFeatures(inv)
	if m.cfg.OnInventory != nil {
		m.cfg.OnInventory(inv)
	}
}

// restartAll serves every resource on a new socket and registers it: a
// restarting kubelet removes the plugins' sockets along with its own.
func (m *Manager) restartAll(ctx context.Context) {
	m.mu.Lock()
	servers := make([]*resourceServer, 0, len(m.servers))
	for _, s := range m.servers {
		servers = append(servers, s)
	}
	m.mu.Unlock()
	for _, s := range servers {
		s.stop() // refresh starts it again
	}
	m.refresh(ctx)
}

func (m *Manager) stopAll() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range m.servers {
		s.stop()
	}
}

// writeFeatures replaces the feature file when its content changes, by
// rename, so node-feature-discovery never reads half a file.
func (m *Manager) writeFeatures(inv *driverstore.Inventory) {
	if m.cfg.FeatureFile == "" {
		return
	}
	data := []byte(deviceplugin.Features(inv))
	if bytes.Equal(data, m.feature) {
		return
	}
	err := writeFile(m.cfg.FeatureFile, data)
	if err != nil {
		m.log.Warn("node feature file not written; node labels will be missing", "file", m.cfg.FeatureFile, "err", err)
		return
	}
	m.feature = data
}

func writeFile(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(data)
	err = errors.Join(err, tmp.Chmod(0o644), tmp.Close())
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
