package driver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"reflect"
	"sync"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/utils/ptr"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/driverstore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/kube/dra"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/setup/cdispec"
)

// Config is what the driver needs from its command line.
type Config struct {
	// Pool is the node's pool name: the node's name.
	Pool string
	// CDIDir holds the claims' specs (the engines' /var/run/cdi).
	CDIDir string
	// Checkpoint is the checkpoint file's path.
	Checkpoint string
	// MetadataDir holds the claims' metadata files (KEP-5304), at the
	// same path on the host, which the specs mount into containers.
	MetadataDir string
	// Sharing is how claims share a device by its memory.
	Sharing dra.Sharing
	// List lists the host's adapters.
	List func() (*driverstore.Inventory, error)
	// Spec is what the claims' specs point at (node, lib dir, hook).
	Spec cdispec.Options
	// HealthTimeout is how long the kubelet trusts a health report; the
	// driver resends well within it.
	HealthTimeout time.Duration
	Log           *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// CheckpointRetry bounds how long New reads again a checkpoint that
	// cannot be read before it gives up; 0 means 30 seconds.
	CheckpointRetry time.Duration
	// LoadCheckpoint reads the checkpoint; nil means dra.LoadCheckpoint.
	// Tests make it fail as a disk does.
	LoadCheckpoint func(path string) (*dra.Checkpoint, error)
}

// Publisher publishes the node's pool: kubeletplugin.Helper does.
type Publisher interface {
	PublishResources(ctx context.Context, resources resourceslice.DriverResources) error
}

// Driver is the DRA plugin.
type Driver struct {
	cfg Config

	mu        sync.Mutex
	devs      []dra.Device
	inv       *driverstore.Inventory
	cp        *dra.Checkpoint
	published []resourceapi.Device
	pub       Publisher
	// healErr is the last failures to heal each claim's files, each
	// logged once.
	healErr map[string][]string
	// changed is closed and replaced whenever the devices change, waking
	// every health watcher.
	changed chan struct{}
}

// New loads the checkpoint, lists the host once and rewrites the prepared
// claims' specs that are missing or changed. A corrupt checkpoint
// is moved aside, in one line, and the driver starts with no claims; one
// that cannot be read is kept and read again with backoff until
// cfg.CheckpointRetry has passed, then New fails in one line (the kubelet
// restarts the driver), as it does when ctx ends.
func New(ctx context.Context, cfg Config) (*Driver, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.HealthTimeout == 0 {
		cfg.HealthTimeout = 30 * time.Second
	}
	if cfg.CheckpointRetry == 0 {
		cfg.CheckpointRetry = 30 * time.Second
	}
	if cfg.LoadCheckpoint == nil {
		cfg.LoadCheckpoint = dra.LoadCheckpoint
	}
	d := &Driver{cfg: cfg, changed: make(chan struct{}), healErr: map[string][]string{}}
	cp, err := d.loadCheckpoint(ctx)
	if err != nil {
		return nil, err
	}
	d.cp = cp
	d.mu.Lock()
	d.refreshLocked()
	d.healLocked()
	d.mu.Unlock()
	return d, nil
}

// loadCheckpoint is New's reading of the checkpoint. It never writes
// over the file: a corrupt one is renamed aside (so the next save cannot
// overwrite it), and one it cannot read may be intact, so it is left as
// it is.
func (d *Driver) loadCheckpoint(ctx context.Context) (*dra.Checkpoint, error) {
	start := time.Now()
	delay := 100 * time.Millisecond
	for {
		cp, err := d.cfg.LoadCheckpoint(d.cfg.Checkpoint)
		if err == nil {
			return cp, nil
		}
		var corrupt *dra.CorruptCheckpointError
		if errors.As(err, &corrupt) {
			to, merr := dra.MoveCheckpointAside(d.cfg.Checkpoint, d.cfg.Now())
			if to != "" {
				d.cfg.Log.Error(fmt.Sprintf("%v: moved it to %s; starting with no prepared claims (the kubelet's unprepare still removes a claim's spec by its name)", err, to))
				if merr != nil {
					d.cfg.Log.Warn(merr.Error())
				}
				return &dra.Checkpoint{Claims: map[string]dra.Prepared{}}, nil
			}
			err = fmt.Errorf("%w: %w", err, merr)
		}
		left := d.cfg.CheckpointRetry - time.Since(start)
		if left <= 0 {
			return nil, fmt.Errorf("%w: kept as it is; gave up after %s: check its permissions and the disk, or move it away", err, time.Since(start).Round(time.Millisecond))
		}
		delay = min(delay, left)
		d.cfg.Log.Warn(fmt.Sprintf("%v: kept as it is; reading it again in %s", err, delay))
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: kept as it is; stopped before it could be read", err)
		case <-time.After(delay):
		}
		delay = min(2*delay, 5*time.Second)
	}
}

// SetPublisher sets where the pool is published and publishes it.
func (d *Driver) SetPublisher(ctx context.Context, p Publisher) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.pub = p
	d.published = nil
	return d.publishLocked(ctx)
}

// Promises is what the prepared claims were promised (Checkpoint.Promises).
func (d *Driver) Promises() []dra.Promise {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cp.Promises()
}

// Devices is the current device set, for tests and logs.
func (d *Driver) Devices() []dra.Device {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]dra.Device(nil), d.devs...)
}

// Refresh lists the host again, rewrites the prepared claims' specs that
// are missing or changed, and republishes the pool if a device changed.
// It returns whether one did.
func (d *Driver) Refresh(ctx context.Context) (bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	changed := d.refreshLocked()
	d.healLocked()
	if !changed {
		return false, nil
	}
	return true, d.publishLocked(ctx)
}

// refreshLocked re-lists the host; true when the devices changed.
func (d *Driver) refreshLocked() bool {
	inv, err := d.cfg.List()
	if err != nil {
		d.cfg.Log.Error("list adapters", "err", err)
	} else {
		d.inv = inv
	}
	devs := dra.Track(d.devs, inv, err, d.cfg.Now())
	if reflect.DeepEqual(devs, d.devs) {
		return false
	}
	for _, dev := range devs {
		if old, ok := dra.Lookup(d.devs, dev.Name); !ok || old.Reason != dev.Reason {
			if dev.Healthy() {
				d.cfg.Log.Info("device available", "device", dev.Name, "adapter", dev.Adapter.Index, "luid", dev.Adapter.LUID.String(), "vendor", dev.Adapter.Vendor)
			} else {
				d.cfg.Log.Warn("device unavailable", "device", dev.Name, "reason", dev.Reason, "problem", dev.Problem)
			}
		}
	}
	d.devs = devs
	close(d.changed)
	d.changed = make(chan struct{})
	return true
}

func (d *Driver) publishLocked(ctx context.Context) error {
	if d.pub == nil {
		return nil
	}
	devices := dra.Slice(d.devs, d.cfg.Sharing)
	if d.published != nil && reflect.DeepEqual(devices, d.published) {
		return nil
	}
	res := resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{
		d.cfg.Pool: {Slices: []resourceslice.Slice{{Devices: devices}}},
	}}
	if err := d.pub.PublishResources(ctx, res); err != nil {
		return fmt.Errorf("publish resource slice: %w", err)
	}
	d.published = devices
	d.cfg.Log.Info("published resource slice", "pool", d.cfg.Pool, "devices", len(devices))
	return nil
}

// PrepareResourceClaims prepares each claim: re-lists the host (a folder
// may have vanished since the last poll), plans, writes the claim's spec
// and the checkpoint, and answers the CDI devices. A claim that fails
// gets its one-line error; the others are unaffected.
func (d *Driver) PrepareResourceClaims(ctx context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	start := time.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.refreshLocked() {
		if err := d.publishLocked(ctx); err != nil {
			d.cfg.Log.Error(err.Error())
		}
	}
	out := make(map[types.UID]kubeletplugin.PrepareResult, len(claims))
	for _, c := range claims {
		devs, err := d.prepareLocked(c)
		if err != nil {
			d.cfg.Log.Error("prepare", "claim", c.Namespace+"/"+c.Name, "uid", c.UID, "err", err)
			out[c.UID] = kubeletplugin.PrepareResult{Err: err}
			continue
		}
		d.cfg.Log.Info("prepared", "claim", c.Namespace+"/"+c.Name, "uid", c.UID, "devices", len(devs), "took", time.Since(start).Round(10*time.Microsecond))
		out[c.UID] = kubeletplugin.PrepareResult{Devices: devs}
	}
	return out, nil
}

func (d *Driver) prepareLocked(c *resourceapi.ResourceClaim) ([]kubeletplugin.Device, error) {
	plan, err := dra.PlanPrepare(c, d.node(), d.devs, d.inv, d.cp)
	if err != nil {
		return nil, err
	}
	// The checkpoint first: a crash between the two leaves a claim the
	// checkpoint knows and whose spec is missing, which the next re-list
	// (or the kubelet's next prepare) writes; the other order could leave
	// a spec nothing removes.
	old, had := d.cp.Claims[plan.UID]
	d.cp.Claims[plan.UID] = plan.Prepared
	if !had || !reflect.DeepEqual(old, plan.Prepared) {
		if err := d.cp.Save(d.cfg.Checkpoint); err != nil {
			if had {
				d.cp.Claims[plan.UID] = old
			} else {
				delete(d.cp.Claims, plan.UID)
			}
			return nil, err
		}
	}
	if err := d.writeFiles(plan.UID, plan.Prepared); err != nil {
		return nil, fmt.Errorf("claim %s/%s: %w", c.Namespace, c.Name, err)
	}
	devs := make([]kubeletplugin.Device, 0, len(plan.Prepared.Devices))
	for _, pd := range plan.Prepared.Devices {
		dev := kubeletplugin.Device{
			Requests: []string{pd.Request}, PoolName: pd.Pool, DeviceName: pd.Device,
			CDIDeviceIDs: []string{pd.CDIDevice},
		}
		if pd.ShareID != "" {
			dev.ShareID = ptr.To(types.UID(pd.ShareID))
		}
		devs = append(devs, dev)
	}
	return devs, nil
}

func (d *Driver) node() dra.Node {
	return dra.Node{Pool: d.cfg.Pool, Spec: d.cfg.Spec, MetadataDir: d.cfg.MetadataDir, Sharing: d.cfg.Sharing}
}

// writeFiles makes the claim's spec and metadata files hold what p
// records, writing only what differs.
func (d *Driver) writeFiles(uid string, p dra.Prepared) error {
	for _, f := range d.claimFiles(uid, p) {
		if f.err != nil {
			return f.err
		}
		if _, err := f.ensure(); err != nil {
			return err
		}
	}
	return nil
}

// UnprepareResourceClaims removes each claim's spec and its checkpoint
// entry. A claim it never prepared (or prepared before the checkpoint was
// lost) is not an error: its spec file, named after its UID, is removed if
// it is one of ours, and nothing else is touched.
func (d *Driver) UnprepareResourceClaims(ctx context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[types.UID]error, len(claims))
	for _, c := range claims {
		err := d.unprepareLocked(string(c.UID))
		if err != nil {
			err = fmt.Errorf("claim %s/%s: %w", c.Namespace, c.Name, err)
			d.cfg.Log.Error("unprepare", "uid", c.UID, "err", err)
		} else {
			d.cfg.Log.Info("unprepared", "claim", c.Namespace+"/"+c.Name, "uid", c.UID)
		}
		out[c.UID] = err
	}
	return out, nil
}

func (d *Driver) unprepareLocked(uid string) error {
	if err := dra.ValidUID(uid); err != nil {
		return err
	}
	if err := dra.RemoveSpec(filepath.Join(d.cfg.CDIDir, dra.SpecFile(uid))); err != nil {
		return err
	}
	if err := dra.RemoveMetadata(d.cfg.MetadataDir, uid); err != nil {
		return err
	}
	if _, ok := d.cp.Claims[uid]; !ok {
		return nil
	}
	delete(d.cp.Claims, uid)
	return d.cp.Save(d.cfg.Checkpoint)
}

// HandleError logs errors of the background publishing; the resourceslice
// controller retries the recoverable ones itself.
func (d *Driver) HandleError(ctx context.Context, err error, msg string) {
	d.cfg.Log.Error(msg, "err", err, "recoverable", errors.Is(err, kubeletplugin.ErrRecoverable))
}

// WatchHealthStatus reports every device's health now, again whenever a
// device changes, and at a third of the health timeout otherwise, until
// ctx ends.
func (d *Driver) WatchHealthStatus(ctx context.Context, reports chan<- kubeletplugin.DeviceHealthReport) error {
	tick := time.NewTicker(d.cfg.HealthTimeout / 3)
	defer tick.Stop()
	for {
		d.mu.Lock()
		report, changed := d.healthLocked(), d.changed
		d.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil
		case reports <- report:
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		case <-tick.C:
		}
	}
}

func (d *Driver) healthLocked() kubeletplugin.DeviceHealthReport {
	now := d.cfg.Now()
	var r kubeletplugin.DeviceHealthReport
	for _, dev := range d.devs {
		h := kubeletplugin.DeviceHealth{
			PoolName: d.cfg.Pool, DeviceName: dev.Name, Health: kubeletplugin.HealthStatusHealthy,
			LastUpdated: now, HealthCheckTimeout: d.cfg.HealthTimeout,
		}
		if !dev.Healthy() {
			h.Health, h.Message = kubeletplugin.HealthStatusUnhealthy, dev.Problem
		}
		r.Devices = append(r.Devices, h)
	}
	return r
}

// RemoveAll removes what the driver wrote on the node (dra.RemoveAll:
// the claims' specs and metadata files, the checkpoint and its
// moved-aside copies) and
// forgets its claims, so that no re-list writes their specs again. It is
// for an uninstall only: at a mere stop the pods that hold claims keep
// running, and their containers' next starts need the specs.
func (d *Driver) RemoveAll() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.cp.Claims = map[string]dra.Prepared{}
	return dra.RemoveAll(d.cfg.CDIDir, d.cfg.MetadataDir, d.cfg.Checkpoint)
}
