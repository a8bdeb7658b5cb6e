package probecache_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/devnode"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/driverstore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/probecache"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/probed"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/ldcache"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/fixture"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/simhost"
)

// world is a simulated host as a probe sees it: the fixture tree, the
// profile's adapters and a boot id.
type world struct {
	root, lib, drivers string
	profile            simhost.Profile
	bootID             string
}

func newWorld(t *testing.T) *world {
	t.Helper()
	root := fixture.Host(t, "nvidia-laptop", fixture.Options{Stubs: true})
	p, err := simhost.Lookup("nvidia-laptop")
	if err != nil {
		t.Fatal(err)
	}
	w := &world{root: root, lib: filepath.Join(root, fixture.LibDir), drivers: filepath.Join(root, fixture.DriversDir),
		profile: p, bootID: "0b4c4ab4-6bd6-4bd8-b3ad-7ad1d0a7a1a1"}
	// Put the dirs' times in the past: a change in the test then moves
	// them even on a file system whose clock ticks coarsely.
	past := time.Now().Add(-time.Hour)
	for _, d := range []string{w.lib, w.drivers} {
		if err := os.Chtimes(d, past, past); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

// key is the state of the world as a start sees it.
func (w *world) key(t *testing.T) *probecache.Key {
	t.Helper()
	k := &probecache.Key{BootID: w.bootID, Device: "/dev/dxg", LibDir: w.lib, DriversDir: w.drivers, Ldcache: true}
	var err error
	if k.Lib, err = probecache.StampOf(w.lib); err != nil {
		t.Fatal(err)
	}
	if k.Drivers, err = probecache.StampOf(w.drivers); err != nil {
		t.Fatal(err)
	}
	for _, a := range fixture.Adapters(w.profile) {
		k.LUIDs = append(k.LUIDs, a.LUID.Uint64())
	}
	return k
}

// host is what a probe of the world returns.
func (w *world) host(t *testing.T) probed.Host {
	t.Helper()
	inv, err := driverstore.Build(fixture.Adapters(w.profile), driverstore.Options{LibDir: w.lib, DriversDir: w.drivers})
	if err != nil {
		t.Fatal(err)
	}
	return probed.Host{Node: devnode.Node{Path: "/dev/dxg", Major: 10, Minor: 125}, Inventory: inv,
		NvidiaSmi: driverstore.FindNvidiaSmi(inv),
		Ldcache:   []ldcache.Entry{{Key: "libcuda.so.1", Path: "/usr/lib/wsl/lib/libcuda.so.1", Flags: ldcache.FlagNative}}}
}

// save caches the world's probe as a start would.
func (w *world) save(t *testing.T, dir string) (string, *probecache.Probe) {
	t.Helper()
	p, err := probecache.FromHost(w.host(t))
	if err != nil {
		t.Fatal(err)
	}
	k := w.key(t)
	path := probecache.Path(dir, k)
	if err := probecache.Save(path, k, p); err != nil {
		t.Fatal(err)
	}
	return path, p
}

// load is a start's lookup: Load, then the LUID check the enumeration makes.
func load(t *testing.T, path string, now *probecache.Key) (*probecache.Probe, error) {
	t.Helper()
	k, p, err := probecache.Load(path, now)
	if err != nil {
		return nil, err
	}
	if !k.Serves(now) {
		return nil, probecache.ErrStale
	}
	return p, nil
}

func TestRoundTrip(t *testing.T) {
	w := newWorld(t)
	want := w.host(t)
	path, _ := w.save(t, t.TempDir())
	p, err := load(t, path, w.key(t))
	if err != nil {
		t.Fatal(err)
	}
	got := p.Host(want.Node, w.key(t))
	if !reflect.DeepEqual(got, want) {
		t.Errorf("cached host differs:\n got %+v\nwant %+v", *got.Inventory, *want.Inventory)
	}
	fi, err := os.Stat(path)
	// Readable by all: a hook in a user namespace of its own reads it.
	if err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("cache file mode: %v, %v; want 0644", fi.Mode(), err)
	}
}

// TestInvalidation: every change of the host a start must not miss makes
// the cache a miss; the unchanged host is a hit (so the test can fail).
func TestInvalidation(t *testing.T) {
	tests := []struct {
		name   string
		change func(t *testing.T, w *world, k *probecache.Key)
		stale  bool
	}{
		{"unchanged", func(*testing.T, *world, *probecache.Key) {}, false},
		{"reboot", func(_ *testing.T, _ *world, k *probecache.Key) { k.BootID = "7c3f3d9e-1c2b-4a5d-9e8f-0a1b2c3d4e5f" }, true},
		{"LUID change at boot", func(_ *testing.T, _ *world, k *probecache.Key) { k.LUIDs[1]++ }, true},
		{"new adapter", func(_ *testing.T, _ *world, k *probecache.Key) { k.LUIDs = append(k.LUIDs, 0x99887766) }, true},
		{"adapter gone", func(_ *testing.T, _ *world, k *probecache.Key) { k.LUIDs = k.LUIDs[:len(k.LUIDs)-1] }, true},
		{"driver update (new folder)", func(t *testing.T, w *world, k *probecache.Key) {
			mkdir(t, filepath.Join(w.drivers, "nv_dispi.inf_amd64_1111111111111111"))
			restamp(t, w, k)
		}, true},
		{"driver update (old folder removed)", func(t *testing.T, w *world, k *probecache.Key) {
			folder := w.profile.Adapters[1].Folder
			if err := os.RemoveAll(filepath.Join(w.drivers, folder)); err != nil {
				t.Fatal(err)
			}
			restamp(t, w, k)
		}, true},
		{"lib dir: library added", func(t *testing.T, w *world, k *probecache.Key) {
			if err := os.WriteFile(filepath.Join(w.lib, "libnew.so.1"), nil, 0o555); err != nil {
				t.Fatal(err)
			}
			restamp(t, w, k)
		}, true},
		{"lib dir: library replaced", func(t *testing.T, w *world, k *probecache.Key) {
			tmp := filepath.Join(w.lib, ".libcuda.so.1.new")
			if err := os.WriteFile(tmp, []byte("new"), 0o555); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, filepath.Join(w.lib, "libcuda.so.1")); err != nil {
				t.Fatal(err)
			}
			restamp(t, w, k)
		}, true},
		{"lib dir remounted", func(_ *testing.T, _ *world, k *probecache.Key) { k.Lib.Dev++ }, true},
		{"another drivers dir", func(_ *testing.T, _ *world, k *probecache.Key) { k.DriversDir += "2" }, true},
		{"details needed, not cached", func(_ *testing.T, _ *world, k *probecache.Key) { k.Details = true }, true},
		{"loader entries not needed", func(_ *testing.T, _ *world, k *probecache.Key) { k.Ldcache = false }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			path, _ := w.save(t, t.TempDir())
			now := w.key(t)
			tt.change(t, w, now)
			_, err := load(t, path, now)
			if tt.stale && !errors.Is(err, probecache.ErrStale) {
				t.Errorf("after the change the cache answered (err %v); want a miss", err)
			}
			if !tt.stale && err != nil {
				t.Errorf("the cache missed: %v", err)
			}
		})
	}
}

func mkdir(t *testing.T, p string) {
	t.Helper()
	if err := os.Mkdir(p, 0o755); err != nil {
		t.Fatal(err)
	}
}

func restamp(t *testing.T, w *world, k *probecache.Key) {
	t.Helper()
	var err error
	if k.Lib, err = probecache.StampOf(w.lib); err != nil {
		t.Fatal(err)
	}
	if k.Drivers, err = probecache.StampOf(w.drivers); err != nil {
		t.Fatal(err)
	}
}

// TestBoundDevices: a cache made with a bound-devices stamp serves only a
// start that reads the same one, and only then stands in for the listing
// (Listed); one made without serves any start through its LUIDs; one made
// under another sysfs root serves none.
func TestBoundDevices(t *testing.T) {
	const a, b = "0\nbind 7\nx 9\n1\n", "0\nbind 7\ny 10\n1\n"
	for _, tt := range []struct {
		name                string
		cachedSysfs, cached string // the cache's root and stamp
		nowSysfs, now       string // the start's
		serves, listed      bool
	}{
		{"same devices", "/sys", a, "/sys", a, true, true},
		{"other devices", "/sys", a, "/sys", b, false, false},
		{"no reading now", "/sys", a, "/sys", "", false, false},
		{"cache made without a usable reading", "/sys", "", "/sys", a, true, false},
		{"neither has one", "/sys", "", "/sys", "", true, false},
		{"another sysfs root", "/sys", a, "/sim/sys", a, false, false},
		{"sysfs turned off", "/sys", "", "", "", false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			k := &probecache.Key{BootID: "b", Device: "/dev/dxg", LibDir: "/l", DriversDir: "/d", LUIDs: []uint64{1}, Sysfs: tt.cachedSysfs, Bound: tt.cached}
			now := *k
			now.Sysfs, now.Bound = tt.nowSysfs, tt.now
			if got := k.Serves(&now); got != tt.serves {
				t.Errorf("Serves = %v, want %v", got, tt.serves)
			}
			if got := tt.serves && k.Listed(&now); got != tt.listed {
				t.Errorf("served and Listed = %v, want %v", got, tt.listed)
			}
		})
	}
}

// TestHostileFiles: a corrupt, hostile or half-written file is a miss, and
// the next Save replaces it with one that hits.
func TestHostileFiles(t *testing.T) {
	// edit rewrites the file with change made to what it holds, unchecked.
	edit := func(change func(k *probecache.Key, p *probecache.Probe)) func(t *testing.T, path string) {
		return func(t *testing.T, path string) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			k, p, err := probecache.Decode(data)
			if err != nil {
				t.Fatal(err)
			}
			change(k, p)
			write(t, path, string(probecache.EncodeUnchecked(k, p)), 0o600)
		}
	}
	const header = 8 + 4 // magic, version
	tests := append(framingCases(1), []hostileCase{
		{"a format 1 (JSON) file", func(t *testing.T, path string) {
			write(t, path, `{"Version":1,"Key":{},"Probe":{}}`, 0o600)
		}},
		{"a length longer than the file", raw(func(data []byte) []byte {
			return append(data[:header], 0xff, 0xff, 0xff, 0xff)
		})},
		{"a boolean neither 0 nor 1", raw(func(data []byte) []byte {
			k, _, err := probecache.Decode(data)
			if err != nil {
				t.Fatal(err)
			}
			details := header + 4*4 + len(k.BootID) + len(k.Device) + len(k.LibDir) + len(k.DriversDir)
			data[details] = 2
			return data
		})},
		{"a bound-devices stamp without a sysfs root", edit(func(k *probecache.Key, _ *probecache.Probe) {
			k.Sysfs, k.Bound = "", "0\nbind 7\n"
		})},
		{"a relative sysfs root", edit(func(k *probecache.Key, _ *probecache.Probe) { k.Sysfs = "sys" })},
		{"folder escapes the drivers dir", edit(func(_ *probecache.Key, p *probecache.Probe) {
			p.Folders[0].Name = "../../../etc/" + p.Folders[0].Name
		})},
		{"loader entry outside the lib dir", edit(func(_ *probecache.Key, p *probecache.Probe) { p.Ldcache[0].Path = "/etc/shadow" })},
		{"loader entry in a subdir", edit(func(_ *probecache.Key, p *probecache.Probe) {
			p.Ldcache[0].Path = "/usr/lib/wsl/lib/../../../../etc/x"
		})},
		{"adapter points at no folder", edit(func(_ *probecache.Key, p *probecache.Probe) { p.Adapters[0].Folder = "x" + p.Adapters[0].Folder })},
		{"LUID not the key's", edit(func(_ *probecache.Key, p *probecache.Probe) { p.Adapters[0].LUID.Low ^= 1 })},
		{"a directory", func(t *testing.T, path string) {
			os.Remove(path)
			mkdir(t, path)
		}},
	}...)
	tests = append(tests, fileRuleCases...)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			dir := t.TempDir()
			path, p := w.save(t, dir)
			tt.do(t, path)
			if got, err := load(t, path, w.key(t)); err == nil {
				t.Fatalf("the cache answered %+v; want a miss", got)
			} else if errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("miss for the wrong reason: %v", err)
			}
			if fi, err := os.Lstat(path); err == nil && fi.IsDir() {
				os.Remove(path) // Save cannot rename over a directory; the hook logs that
			}
			if err := probecache.Save(path, w.key(t), p); err != nil {
				t.Fatalf("replace: %v", err)
			}
			if _, err := load(t, path, w.key(t)); err != nil {
				t.Fatalf("after replacing: %v", err)
			}
		})
	}
}

// hostileCase damages the file at path.
type hostileCase struct {
	name string
	do   func(t *testing.T, path string)
}

// raw rewrites the file's bytes.
func raw(change func(data []byte) []byte) func(t *testing.T, path string) {
	return func(t *testing.T, path string) {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		write(t, path, string(change(data)), 0o600)
	}
}

// framingCases break the framing both cache files share: an 8-byte magic,
// a format version (otherFormat is another's first byte), fields to the
// last byte.
func framingCases(otherFormat byte) []hostileCase {
	return []hostileCase{
		{"garbage", func(t *testing.T, path string) { write(t, path, "\x00\xffnot a cache", 0o600) }},
		{"empty", func(t *testing.T, path string) { write(t, path, "", 0o600) }},
		{"half written", raw(func(data []byte) []byte { return data[:len(data)/2] })},
		{"data after the end", raw(func(data []byte) []byte { return append(data, 0) })},
		{"other magic", raw(func(data []byte) []byte { data[0] ^= 1; return data })},
		{"other format", raw(func(data []byte) []byte { data[8] = otherFormat; return data })},
	}
}

// fileRuleCases break the rules both cache files are read under, whatever
// they hold: size, mode, type.
var fileRuleCases = []hostileCase{
	{"oversized", func(t *testing.T, path string) {
		write(t, path, strings.Repeat(" ", probecache.MaxSize+1), 0o600)
	}},
	{"writable by others", func(t *testing.T, path string) {
		if err := os.Chmod(path, 0o666); err != nil {
			t.Fatal(err)
		}
	}},
	{"symlink to a good file", func(t *testing.T, path string) {
		good := filepath.Join(t.TempDir(), "good")
		data, _ := os.ReadFile(path)
		write(t, good, string(data), 0o600)
		os.Remove(path)
		if err := os.Symlink(good, path); err != nil {
			t.Fatal(err)
		}
	}},
	{"a fifo", func(t *testing.T, path string) {
		os.Remove(path)
		if err := mkfifo(path); err != nil {
			t.Fatal(err)
		}
	}},
	{"owned by another user", func(t *testing.T, path string) {
		if os.Geteuid() != 0 {
			t.Skip("root: chowns the file")
		}
		if err := os.Chown(path, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}},
}

// TestRefusedDir: a cache dir others may write is neither read nor written.
func TestRefusedDir(t *testing.T) {
	w := newWorld(t)
	dir := filepath.Join(t.TempDir(), "cache")
	path, p := w.save(t, dir)
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := load(t, path, w.key(t)); err == nil || !strings.Contains(err.Error(), "writable by others") || !errors.Is(err, probecache.ErrUntrusted) {
		t.Errorf("load from a world-writable dir: %v", err)
	}
	if err := probecache.Save(path, w.key(t), p); err == nil {
		t.Errorf("saved into a world-writable dir")
	}
}

// TestNotCacheable: a probe that skipped an adapter is not cached.
func TestNotCacheable(t *testing.T) {
	w := newWorld(t)
	h := w.host(t)
	h.Inventory.Adapters[0].Err = errors.New("folder not found")
	if _, err := probecache.FromHost(h); !errors.Is(err, probecache.ErrNotCacheable) {
		t.Errorf("FromHost with a failed adapter: %v", err)
	}
}

func write(t *testing.T, path, data string, mode fs.FileMode) {
	t.Helper()
	os.Remove(path)
	if err := os.WriteFile(path, []byte(data), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}
