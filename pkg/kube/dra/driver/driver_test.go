package driver

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/utils/ptr"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/devnode"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/driverstore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/dxcore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/kube/dra"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/setup/cdispec"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/simhost"
)

const (
	node  = "node-a"
	nvDev = "nvidia-2520-3a5c17aa-0"
	igDev = "intel-9a49-22d817aa-0"
	uid1  = "6f1c2d9e-0b7a-4c43-9d7e-2a1b3c4d5e6f"
	uid2  = "0a0b0c0d-0000-4000-8000-000000000001"
)

// host is a simulated host whose adapters a test changes.
type host struct {
	mu  sync.Mutex
	inv *driverstore.Inventory
	err error
}

func (h *host) list() (*driverstore.Inventory, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err != nil {
		return nil, h.err
	}
	c := *h.inv
	c.Adapters = append([]driverstore.Adapter(nil), h.inv.Adapters...)
	return &c, nil
}

func (h *host) set(f func(inv *driverstore.Inventory)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f(h.inv)
}

func newHost(t testing.TB) *host {
	p, err := simhost.Lookup("nvidia-laptop")
	if err != nil {
		t.Fatal(err)
	}
	inv := &driverstore.Inventory{LibDir: "/usr/lib/wsl/lib", DriversDir: "/usr/lib/wsl/drivers"}
	for i, a := range p.Adapters {
		inv.Adapters = append(inv.Adapters, driverstore.Adapter{
			Adapter: dxcore.Adapter{Index: i, LUID: dxcore.LUID{Low: a.LUIDLow}, WDDMVersion: a.WDDMVersion, Type: dxcore.AdapterType(a.Flags),
				PCI:         dxcore.PCIIDs{Vendor: a.VendorID, Device: a.DeviceID, SubVendor: a.SubVendorID, SubSystem: a.SubSystemID},
				Description: a.Description, DriverStorePath: a.DriverStorePath, Memory: dxcore.Memory{DedicatedVideo: a.DedicatedMemory}},
			Vendor: driverstore.VendorOf(a.VendorID), Folder: a.Folder, Registry: a.Folder,
		})
	}
	return &host{inv: inv}
}

// removeAdapter drops host adapter i, renumbering the rest.
func removeAdapter(i int) func(inv *driverstore.Inventory) {
	return func(inv *driverstore.Inventory) {
		inv.Adapters = append(inv.Adapters[:i:i], inv.Adapters[i+1:]...)
		for k := range inv.Adapters {
			inv.Adapters[k].Index = k
		}
	}
}

type env struct {
	host               *host
	cdiDir, ckpt, meta string
	log                *logBuf
}

// logBuf is the driver's log, read by the tests.
type logBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// lines are the messages logged since the last call.
func (l *logBuf) lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(l.b.String()), "\n") {
		if line != "" {
			out = append(out, line)
		}
	}
	l.b.Reset()
	return out
}

func newEnv(t testing.TB) *env {
	dir := t.TempDir()
	e := &env{host: newHost(t), cdiDir: filepath.Join(dir, "cdi"), ckpt: filepath.Join(dir, "plugin", "checkpoint.json"),
		meta: filepath.Join(dir, "plugin", "claims"), log: &logBuf{}}
	return e
}

func (e *env) config() Config {
	return Config{
		Pool: node, CDIDir: e.cdiDir, Checkpoint: e.ckpt, MetadataDir: e.meta, List: e.host.list,
		Sharing: dra.Sharing{Step: 256 << 20, Default: 1 << 30},
		Spec:    cdispec.Options{Device: devnode.Node{Path: "/dev/dxg"}, LibDir: "/usr/lib/wsl/lib", HookPath: "/usr/local/bin/wsl-gpu-hook"},
		Log: slog.New(slog.NewTextHandler(e.log, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		}})),
	}
}

func (e *env) driver(t testing.TB) *Driver {
	t.Helper()
	d, err := New(context.Background(), e.config())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func claim(uid, name string, devices ...string) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID(uid)}}
	c.Status.Allocation = &resourceapi.AllocationResult{}
	for _, d := range devices {
		c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results,
			resourceapi.DeviceRequestAllocationResult{Request: "gpu", Driver: dra.DriverName, Pool: node, Device: d})
	}
	return c
}

func (e *env) specs(t *testing.T) []string {
	entries, err := os.ReadDir(e.cdiDir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []string
	for _, en := range entries {
		out = append(out, en.Name())
	}
	return out
}

func prepare(t *testing.T, d *Driver, c *resourceapi.ResourceClaim) kubeletplugin.PrepareResult {
	t.Helper()
	res, err := d.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{c})
	if err != nil || len(res) != 1 {
		t.Fatalf("PrepareResourceClaims = %v, %v", res, err)
	}
	return res[c.UID]
}

func unprepare(t *testing.T, d *Driver, uid, name string) error {
	t.Helper()
	res, err := d.UnprepareResourceClaims(context.Background(), []kubeletplugin.NamespacedObject{{NamespacedName: types.NamespacedName{Namespace: "default", Name: name}, UID: types.UID(uid)}})
	if err != nil || len(res) != 1 {
		t.Fatalf("UnprepareResourceClaims = %v, %v", res, err)
	}
	return res[types.UID(uid)]
}

// Prepare writes one spec and answers its CDI devices; a second prepare
// (the kubelet retrying) and a prepare after a driver restart answer the
// same; unprepare after the restart removes exactly that spec.
func TestPrepareRestartUnprepare(t *testing.T) {
	e := newEnv(t)
	d := e.driver(t)
	first := prepare(t, d, claim(uid1, "two", igDev, nvDev))
	if first.Err != nil {
		t.Fatal(first.Err)
	}
	var ids []string
	for _, dev := range first.Devices {
		ids = append(ids, dev.PoolName+"/"+dev.DeviceName+"="+strings.Join(dev.CDIDeviceIDs, ","))
	}
	want := []string{node + "/" + igDev + "=" + dra.CDIDevice(uid1, igDev), node + "/" + nvDev + "=" + dra.CDIDevice(uid1, nvDev)}
	if strings.Join(ids, " ") != strings.Join(want, " ") {
		t.Errorf("devices = %v, want %v", ids, want)
	}
	if got := e.specs(t); len(got) != 1 || got[0] != dra.SpecFile(uid1) {
		t.Fatalf("CDI dir = %v, want only %s", got, dra.SpecFile(uid1))
	}
	spec, _ := os.ReadFile(filepath.Join(e.cdiDir, dra.SpecFile(uid1)))
	if again := prepare(t, d, claim(uid1, "two", igDev, nvDev)); again.Err != nil || len(again.Devices) != 2 {
		t.Errorf("second prepare = %+v", again)
	}

	restarted := e.driver(t)
	if again := prepare(t, restarted, claim(uid1, "two", igDev, nvDev)); again.Err != nil || !equalDevices(again.Devices, first.Devices) {
		t.Errorf("prepare after restart = %+v, want %+v", again, first)
	}
	if now, _ := os.ReadFile(filepath.Join(e.cdiDir, dra.SpecFile(uid1))); string(now) != string(spec) {
		t.Errorf("spec changed across a restart")
	}
	// A file beside ours, of another producer, is left alone.
	other := filepath.Join(e.cdiDir, "nvidia.yaml")
	os.WriteFile(other, []byte("kind: nvidia.com/gpu\n"), 0o644)

	again := e.driver(t)
	if err := unprepare(t, again, uid1, "two"); err != nil {
		t.Fatal(err)
	}
	if got := e.specs(t); len(got) != 1 || got[0] != "nvidia.yaml" {
		t.Errorf("CDI dir after unprepare = %v, want only nvidia.yaml", got)
	}
	cp, err := dra.LoadCheckpoint(e.ckpt)
	if err != nil || len(cp.Claims) != 0 {
		t.Errorf("checkpoint after unprepare = %+v, %v", cp, err)
	}
	// Unprepare is idempotent.
	if err := unprepare(t, again, uid1, "two"); err != nil {
		t.Errorf("second unprepare: %v", err)
	}
}

// prepareTwo prepares claim uid1 (nv) for the NVIDIA GPU and uid2 (ig)
// for the Intel one, and returns their spec paths and contents.
func (e *env) prepareTwo(t *testing.T, d *Driver) (path1, path2 string, spec1, spec2 []byte) {
	t.Helper()
	for _, c := range []struct{ uid, name, dev string }{{uid1, "nv", nvDev}, {uid2, "ig", igDev}} {
		if r := prepare(t, d, claim(c.uid, c.name, c.dev)); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	path1, path2 = filepath.Join(e.cdiDir, dra.SpecFile(uid1)), filepath.Join(e.cdiDir, dra.SpecFile(uid2))
	spec1, err1 := os.ReadFile(path1)
	spec2, err2 := os.ReadFile(path2)
	if err := errors.Join(err1, err2); err != nil {
		t.Fatal(err)
	}
	return path1, path2, spec1, spec2
}

func equalDevices(a, b []kubeletplugin.Device) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

// Unprepare removes only what prepare made: a file at the claim's spec
// name that is not a claim spec stays, and the error says why.
func TestUnprepareLeavesForeignFiles(t *testing.T) {
	e := newEnv(t)
	d := e.driver(t)
	os.MkdirAll(e.cdiDir, 0o755)
	path := filepath.Join(e.cdiDir, dra.SpecFile(uid2))
	os.WriteFile(path, []byte(`{"cdiVersion":"0.5.0","kind":"nvidia.com/gpu","devices":[]}`), 0o644)
	err := unprepare(t, d, uid2, "x")
	if err == nil || err.Error() != "claim default/x: "+path+" is not a gpu.wsl-gpu-hook.dev/claim spec: not removing what the driver did not write" {
		t.Errorf("unprepare = %v", err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("foreign file removed: %v", err)
	}
	os.Remove(path)
	os.Symlink("/etc/passwd", path)
	if err := unprepare(t, d, uid2, "x"); err == nil || !strings.Contains(err.Error(), "is not a regular file") {
		t.Errorf("unprepare of a symlink = %v", err)
	}
	if _, err := os.Lstat(path); err != nil {
		t.Errorf("symlink removed: %v", err)
	}
}

// A corrupt checkpoint is moved aside with its bytes, in one line, never
// overwritten and never trusted: the driver starts empty and still
// unprepares a claim it prepared before, by its spec's name.
func TestCorruptCheckpoint(t *testing.T) {
	e := newEnv(t)
	if r := prepare(t, e.driver(t), claim(uid1, "gpu", nvDev)); r.Err != nil {
		t.Fatal(r.Err)
	}
	bad := `{"version":1,"driver":"gpu.wsl-gpu-hook.dev","claims":{"` + uid2 + `":{}},"checksum":"sha256:00"}`
	os.WriteFile(e.ckpt, []byte(bad), 0o600)
	e.log.lines()
	cfg := e.config()
	cfg.Now = func() time.Time { return time.Date(2026, 11, 26, 4, 0, 0, 0, time.UTC) }
	d, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	aside := e.ckpt + ".corrupt-20261126T040000.000000000Z"
	if data, err := os.ReadFile(aside); err != nil || string(data) != bad {
		t.Errorf("moved-aside checkpoint = %q, %v; want the corrupt bytes", data, err)
	}
	want := `level=ERROR msg="checkpoint ` + e.ckpt + ` is corrupt: checksum mismatch: the file was changed or cut since the driver wrote it: moved it to ` + aside + `; starting with no prepared claims (the kubelet's unprepare still removes a claim's spec by its name)"`
	if got := e.log.lines(); len(got) == 0 || got[0] != want {
		t.Errorf("log = %q\nwant first %s", got, want)
	}
	if err := unprepare(t, d, uid1, "gpu"); err != nil {
		t.Fatal(err)
	}
	if got := e.specs(t); len(got) != 0 {
		t.Errorf("CDI dir = %v, want empty", got)
	}
	if data, err := os.ReadFile(aside); err != nil || string(data) != bad {
		t.Errorf("moved-aside checkpoint after unprepare = %q, %v", data, err)
	}

	// One that cannot be moved aside (here: a copy of that time exists)
	// is not overwritten either: the start fails.
	os.WriteFile(e.ckpt, []byte(bad), 0o600)
	cfg.CheckpointRetry = 50 * time.Millisecond
	if _, err := New(context.Background(), cfg); err == nil || !strings.HasPrefix(err.Error(), "checkpoint "+e.ckpt+" is corrupt: checksum mismatch: the file was changed or cut since the driver wrote it: move checkpoint aside: "+aside+" exists: kept as it is; gave up after ") {
		t.Errorf("New with a corrupt checkpoint it cannot move = %v", err)
	}
	if data, _ := os.ReadFile(e.ckpt); string(data) != bad {
		t.Errorf("checkpoint it could not move aside was changed: %q", data)
	}
}

// A checkpoint that cannot be read is kept as it is and read again: a
// start that reads it within CheckpointRetry goes on with its claims; one
// that never does fails in one line and leaves the file alone.
func TestUnreadableCheckpoint(t *testing.T) {
	e := newEnv(t)
	if r := prepare(t, e.driver(t), claim(uid1, "gpu", nvDev)); r.Err != nil {
		t.Fatal(r.Err)
	}
	before, _ := os.ReadFile(e.ckpt)
	failing := func(errs ...error) func(string) (*dra.Checkpoint, error) {
		return func(path string) (*dra.Checkpoint, error) {
			if len(errs) == 0 {
				return dra.LoadCheckpoint(path)
			}
			err := errs[0]
			errs = errs[1:]
			return nil, &dra.CheckpointReadError{Path: path, Err: &fs.PathError{Op: "open", Path: path, Err: err}}
		}
	}
	t.Run("EIO, EMFILE, then read", func(t *testing.T) {
		e.log.lines()
		cfg := e.config()
		cfg.LoadCheckpoint = failing(syscall.EIO, syscall.EMFILE)
		d, err := New(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{
			`level=WARN msg="read checkpoint ` + e.ckpt + `: open ` + e.ckpt + `: input/output error: kept as it is; reading it again in 100ms"`,
			`level=WARN msg="read checkpoint ` + e.ckpt + `: open ` + e.ckpt + `: too many open files: kept as it is; reading it again in 200ms"`,
		}
		if got := e.log.lines(); len(got) < 2 || !slices.Equal(got[:2], want) {
			t.Errorf("log = %q\nwant first %q", got, want)
		}
		// The claim survived: a second claim for its device is refused.
		if r := prepare(t, d, claim(uid2, "other", nvDev)); r.Err == nil || !strings.Contains(r.Err.Error(), "already prepared for claim default/gpu") {
			t.Errorf("prepare of a held device = %v, want refused", r.Err)
		}
	})
	t.Run("EACCES until the bound", func(t *testing.T) {
		cfg := e.config()
		cfg.CheckpointRetry = 250 * time.Millisecond
		cfg.LoadCheckpoint = failing(syscall.EACCES, syscall.EACCES, syscall.EACCES, syscall.EACCES, syscall.EACCES, syscall.EACCES)
		d, err := New(context.Background(), cfg)
		re := regexp.MustCompile(`^read checkpoint ` + regexp.QuoteMeta(e.ckpt) + `: open ` + regexp.QuoteMeta(e.ckpt) + `: permission denied: kept as it is; gave up after ([0-9.]+m?s): check its permissions and the disk, or move it away$`)
		if d != nil || err == nil || !re.MatchString(err.Error()) || !errors.Is(err, fs.ErrPermission) {
			t.Fatalf("New = %v, %v; want %s", d, err, re)
		}
		// Not before the bound (a loaded machine may sleep longer).
		if after, _ := time.ParseDuration(re.FindStringSubmatch(err.Error())[1]); after < cfg.CheckpointRetry {
			t.Errorf("gave up after %v, before the %v bound", after, cfg.CheckpointRetry)
		}
	})
	t.Run("stopped", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		cfg := e.config()
		cfg.LoadCheckpoint = failing(syscall.EIO)
		if _, err := New(ctx, cfg); err == nil || err.Error() != "read checkpoint "+e.ckpt+": open "+e.ckpt+": input/output error: kept as it is; stopped before it could be read" {
			t.Errorf("New after ctx ended = %v", err)
		}
	})
	if after, _ := os.ReadFile(e.ckpt); string(after) != string(before) {
		t.Errorf("checkpoint changed:\nbefore %s\nafter %s", before, after)
	}
	if m, _ := filepath.Glob(e.ckpt + ".corrupt-*"); len(m) != 0 {
		t.Errorf("an unreadable checkpoint was moved aside: %v", m)
	}
	// A real mode 000 file, where the test is not root.
	if os.Geteuid() != 0 {
		os.Chmod(e.ckpt, 0)
		defer os.Chmod(e.ckpt, 0o600)
		cfg := e.config()
		cfg.CheckpointRetry = 50 * time.Millisecond
		if _, err := New(context.Background(), cfg); !errors.Is(err, fs.ErrPermission) {
			t.Errorf("New with a mode 000 checkpoint = %v, want EACCES", err)
		}
		os.Chmod(e.ckpt, 0o600)
		if after, _ := os.ReadFile(e.ckpt); string(after) != string(before) {
			t.Errorf("mode 000 checkpoint changed")
		}
	}
}

// A second exclusive claim for a device another claim holds fails until
// the first is unprepared, across a driver restart (the checkpoint holds
// the first).
func TestExclusive(t *testing.T) {
	e := newEnv(t)
	if r := prepare(t, e.driver(t), claim(uid1, "first", nvDev)); r.Err != nil {
		t.Fatal(r.Err)
	}
	d := e.driver(t)
	r := prepare(t, d, claim(uid2, "second", nvDev))
	if r.Err == nil || r.Err.Error() != "claim default/second: device "+nvDev+" is already prepared for claim default/first, and one of the two has it alone: to share an adapter, ask for part of its memory (capacity.requests.memory) with the driver's sharing on, or let the pods reference one ResourceClaim" {
		t.Errorf("second claim = %+v", r)
	}
	if err := unprepare(t, d, uid1, "first"); err != nil {
		t.Fatal(err)
	}
	if r := prepare(t, d, claim(uid2, "second", nvDev)); r.Err != nil {
		t.Errorf("second claim after the first's unprepare: %v", r.Err)
	}
}

// A claim for an adapter whose folder vanished fails with one line and
// writes nothing.
func TestPrepareFolderVanished(t *testing.T) {
	e := newEnv(t)
	d := e.driver(t)
	e.host.set(func(inv *driverstore.Inventory) {
		a := &inv.Adapters[1]
		a.Err = &driverstore.FolderError{Index: 1, LUID: a.LUID, Description: a.Description, Folder: a.Folder, DriversDir: inv.DriversDir, Err: fs.ErrNotExist}
		a.Folder = ""
	})
	e.refused(t, prepare(t, d, claim(uid1, "gpu", nvDev)),
		`claim default/gpu: adapter 1 (NVIDIA GeForce RTX 3060 Laptop GPU, LUID 0x4486d1): driver store folder "nvltwi.inf_amd64_7b2a5c1c4e6f8d90" was not found under /usr/lib/wsl/drivers: the Windows driver was probably updated while WSL was running: run wsl --shutdown`)
}

// refused checks a prepare failed with want and wrote nothing: no spec,
// no checkpoint.
func (e *env) refused(t *testing.T, r kubeletplugin.PrepareResult, want string) {
	t.Helper()
	if r.Err == nil || r.Err.Error() != want {
		t.Errorf("prepare = %v\nwant %s", r.Err, want)
	}
	if got := e.specs(t); len(got) != 0 {
		t.Errorf("CDI dir = %v, want empty", got)
	}
	if _, err := os.Stat(e.ckpt); !os.IsNotExist(err) {
		t.Errorf("checkpoint written for a refused claim: %v", err)
	}
}

type recorder struct {
	mu  sync.Mutex
	got []resourceslice.DriverResources
}

func (r *recorder) PublishResources(_ context.Context, res resourceslice.DriverResources) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, res)
	return nil
}

// An adapter removed from the host republishes the pool with the device
// tainted and reports it unhealthy to every health watcher.
func TestRefreshRepublishesAndReportsHealth(t *testing.T) {
	e := newEnv(t)
	d := e.driver(t)
	rec := &recorder{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := d.SetPublisher(ctx, rec); err != nil {
		t.Fatal(err)
	}
	reports := make(chan kubeletplugin.DeviceHealthReport)
	go d.WatchHealthStatus(ctx, reports)
	if r := <-reports; len(r.Devices) != 2 || r.Devices[1].Health != kubeletplugin.HealthStatusHealthy {
		t.Fatalf("first report = %+v", r)
	}
	if changed, err := d.Refresh(ctx); changed || err != nil {
		t.Errorf("Refresh with nothing changed = %v, %v", changed, err)
	}
	e.host.set(removeAdapter(1))
	if changed, err := d.Refresh(ctx); !changed || err != nil {
		t.Fatalf("Refresh after removal = %v, %v", changed, err)
	}
	if len(rec.got) != 2 {
		t.Fatalf("published %d times, want 2", len(rec.got))
	}
	devs := rec.got[1].Pools[node].Slices[0].Devices
	if len(devs) != 2 || devs[1].Name != nvDev || len(devs[1].Taints) != 1 || devs[1].Taints[0].Value != dra.ReasonGone {
		t.Errorf("republished devices = %+v", devs)
	}
	select {
	case r := <-reports:
		if r.Devices[1].DeviceName != nvDev || r.Devices[1].Health != kubeletplugin.HealthStatusUnhealthy || !strings.Contains(r.Devices[1].Message, "the host no longer lists this adapter") {
			t.Errorf("report after removal = %+v", r)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no health report after the removal")
	}
}

// A claim with opaque parameters for this driver fails its prepare with
// the one line the kubelet records as the pod's event, and writes nothing.
func TestPrepareOpaqueParameters(t *testing.T) {
	e := newEnv(t)
	d := e.driver(t)
	c := claim(uid1, "gpu", nvDev)
	c.Status.Allocation.Devices.Config = []resourceapi.DeviceAllocationConfiguration{{Source: resourceapi.AllocationConfigSourceClass,
		DeviceConfiguration: resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{Driver: dra.DriverName, Parameters: runtime.RawExtension{Raw: []byte(`{}`)}}}}}
	e.refused(t, prepare(t, d, c), "claim default/gpu: opaque parameters for driver gpu.wsl-gpu-hook.dev (from its DeviceClass, for every request) are not understood: the driver takes no parameters: remove the opaque config and select the adapter with CEL selectors on its attributes")
}

// shareClaim is a claim with a share of device, as the scheduler
// allocates one on a device that allows multiple allocations.
func shareClaim(uid, name, device, shareID, memory string) *resourceapi.ResourceClaim {
	c := claim(uid, name, device)
	r := &c.Status.Allocation.Devices.Results[0]
	r.ShareID = ptr.To(types.UID(shareID))
	r.ConsumedCapacity = map[resourceapi.QualifiedName]resource.Quantity{dra.CapacityMemory: resource.MustParse(memory)}
	return c
}

// Claims with shares of one device are all prepared, each with its share
// ID for the kubelet and its metadata file; the answers survive a
// restart; unprepare removes the claim's spec and metadata and leaves the
// other's; a metadata file lost under a running pod is rewritten.
func TestShares(t *testing.T) {
	e := newEnv(t)
	d := e.driver(t)
	const s1, s2 = "5e5e5e5e-0000-4000-8000-000000000001", "5e5e5e5e-0000-4000-8000-000000000002"
	a := prepare(t, d, shareClaim(uid1, "a", nvDev, s1, "1Gi"))
	b := prepare(t, d, shareClaim(uid2, "b", nvDev, s2, "3Gi"))
	for _, r := range []struct {
		res   kubeletplugin.PrepareResult
		share string
	}{{a, s1}, {b, s2}} {
		if r.res.Err != nil || len(r.res.Devices) != 1 || ptr.Deref(r.res.Devices[0].ShareID, "") != types.UID(r.share) {
			t.Errorf("prepare = %+v, want share %s", r.res, r.share)
		}
	}
	meta1, meta2 := dra.MetadataFile(e.meta, uid1, "gpu"), dra.MetadataFile(e.meta, uid2, "gpu")
	data1, err1 := os.ReadFile(meta1)
	_, err2 := os.ReadFile(meta2)
	if err := errors.Join(err1, err2); err != nil || !strings.Contains(string(data1), `"shareID"`) {
		t.Fatalf("metadata files: %v\n%s", err, data1)
	}
	if again := prepare(t, e.driver(t), shareClaim(uid1, "a", nvDev, s1, "1Gi")); !equalDevices(again.Devices, a.Devices) {
		t.Errorf("prepare after a restart = %+v, want %+v", again, a)
	}
	cp, _ := dra.LoadCheckpoint(e.ckpt)
	if got := cp.Promised(); got["0x4486d1"] != 4<<30 {
		t.Errorf("promised = %v, want 4Gi on the NVIDIA adapter", got)
	}

	os.Remove(meta1)
	e.log.lines()
	if _, err := d.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(meta1); string(got) != string(data1) {
		t.Errorf("metadata after a re-list:\n%s\nwant\n%s", got, data1)
	}
	want := `level=INFO msg="rewrote claim metadata" claim=default/a uid=` + uid1 + ` file=` + meta1 + ` was=missing`
	if got := e.log.lines(); !slices.Contains(got, want) {
		t.Errorf("log = %q\nwant %s", got, want)
	}

	if err := unprepare(t, d, uid1, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Dir(meta1)); !os.IsNotExist(err) {
		t.Errorf("claim a's metadata dir after its unprepare: %v", err)
	}
	if _, err := os.Stat(meta2); err != nil {
		t.Errorf("claim b's metadata after a's unprepare: %v", err)
	}
	if got := e.specs(t); !slices.Equal(got, []string{dra.SpecFile(uid2)}) {
		t.Errorf("CDI dir = %v, want b's spec only", got)
	}
}
