package e2e

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/probecache"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/fixture"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/simhost"
)

// TestUserNamespace runs the hook for a container in its own user
// namespace (root mapped to host uid 100000), as userns-remap engines do.
// A node the hook created on that namespace's /dev could not be opened, so
// the hook binds the host's; with the device in the spec (CDI, the
// wrapper) the runtime's node is kept. Either way the GPU works.
func TestUserNamespace(t *testing.T) {
	env(t)
	major, minor := int64(10), int64(229)
	mode := os.FileMode(0o666)
	tests := []struct {
		name   string
		inSpec bool // /dev/dxg in linux.devices, as CDI and the wrapper put it
	}{
		{name: "hook alone"},
		{name: "device in the spec", inSpec: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := box{
				image:  imageBusybox,
				sim:    &simulation{profile: "nvidia-laptop"},
				hook:   hookConfig,
				env:    []string{"WSL_GPU_DEVICES=all"},
				userns: true,
				prepare: func(t *testing.T, rootfs string) {
					// The mapped root (host uid 100000) must reach the bundle.
					fixture.OpenToAll(t, filepath.Dir(rootfs))
				},
				checks: []check{{"dxg", "fsprobe open-rw /dev/dxg"}, {"lib", "ls /usr/lib/wsl/lib/libdxcore.so"}},
			}
			if tt.inSpec {
				// runc binds the host's /dev/dxg into a user namespace:
				// the simulated node must sit at the real path.
				b.sim = &simulation{profile: "nvidia-laptop", bindHost: true}
				b.hook = hookDefault
				b.devices = []specs.LinuxDevice{{Path: "/dev/dxg", Type: "c", Major: major, Minor: minor, FileMode: &mode}}
				b.rules = []specs.LinuxDeviceCgroup{{Allow: true, Type: "c", Major: &major, Minor: &minor, Access: "rwm"}}
			}
			o := runBox(t, b)
			o.started(t)
			wantOutput(t, o, "dxg", "open-rw /dev/dxg: ok")
			wantOutput(t, o, "lib", "/usr/lib/wsl/lib/libdxcore.so")
			if want := "bound from"; !tt.inSpec && !strings.Contains(o.hookLog, want) {
				t.Errorf("hook log lacks %q: the node must be the host's\n%s", want, o.hookLog)
			}
		})
	}
}

// TestCDIUserNamespace: a CDI device's hook in a container with a user
// namespace of its own runs as the container's root (host uid 100000),
// which cannot read config.json when the engine wrote it for root alone,
// as podman and Docker do. The hook reads only its argument, the state and
// its working directory, so the GPU works; a spec from before that (one
// hook with no argument) fails the start with one line saying what to do,
// which also reaches syslog: the hook cannot open root's log file there.
func TestCDIUserNamespace(t *testing.T) {
	env(t)
	tests := []struct {
		name    string
		cdi     []string
		legacy  bool
		folders []string // in ls /usr/lib/wsl/drivers
		wantErr string
	}{
		{name: "nvidia.com/gpu=all", cdi: []string{"nvidia.com/gpu=all"}, folders: []string{"nvltwi.inf_amd64_"}},
		{name: "two devices, two kinds", cdi: []string{"nvidia.com/gpu=0", "wsl-gpu-hook.dev/gpu=intel"}, folders: []string{"iigd_dch.inf_amd64_", "nvltwi.inf_amd64_"}},
		{name: "spec from before the hook took arguments", cdi: []string{"nvidia.com/gpu=all"}, legacy: true,
			wantErr: "config.json: permission denied: this CDI spec predates wsl-gpu-hook's support for containers with a user namespace of their own: regenerate it with wsl-gpu-hook cdi generate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			shared := t.TempDir()
			fixture.OpenToAll(t, shared)
			sock, received := fixture.Syslogd(t, shared)
			o := runBox(t, box{
				image: imageDebian,
				// runc binds the host's /dev/dxg into a user namespace: the
				// simulated node must sit at the real path.
				sim:           &simulation{profile: "nvidia-laptop", bindHost: true},
				cdi:           tt.cdi,
				cdiLegacyHook: tt.legacy,
				userns:        true,
				configMode:    0o600,
				syslog:        sock,
				prepare: func(t *testing.T, rootfs string) {
					// The mapped root reaches the root filesystem, not
					// config.json, and owns the image, as engines remap it.
					fixture.OpenToAll(t, filepath.Dir(rootfs))
					remapImage(t, rootfs)
				},
				checks: []check{{"uidmap", "head -n1 /proc/self/uid_map"}, {"dxg", "fsprobe open-rw /dev/dxg"},
					{"folders", "ls /usr/lib/wsl/drivers"}, {"cuda", "cudaprobe"}},
			})
			if tt.wantErr != "" {
				got, ok := hookStderr(o.stderr)
				line, rest, _ := strings.Cut(strings.TrimSpace(got), "\n")
				if o.exitCode == 0 || !ok || rest != "" || !strings.Contains(line, tt.wantErr) || !hookLine.MatchString(line) {
					t.Fatalf("want a failed start with one hook line containing %q, got exit %d:\n%s", tt.wantErr, o.exitCode, o.stderr)
				}
				// The hook cannot open root's log from the namespace: the
				// failure reaches syslog, where an administrator reads it.
				logged := received()
				if len(logged) != 1 || !strings.HasPrefix(logged[0], "<27>wsl-gpu-hook: level=error msg=") || !strings.Contains(logged[0], tt.wantErr) || !strings.HasSuffix(logged[0], " stage=cdi-hook") {
					t.Errorf("syslog got %q, want the error", logged)
				}
				return
			}
			if logged := received(); len(logged) != 0 {
				t.Errorf("syslog got %q from a start that worked", logged)
			}
			o.started(t)
			if f := strings.Fields(o.succeeds(t, "uidmap")); len(f) != 3 || f[1] != "100000" {
				t.Errorf("the container's root is not host uid 100000: %v", f)
			}
			wantOutput(t, o, "dxg", "open-rw /dev/dxg: ok")
			for _, f := range tt.folders {
				wantContains(t, o, "folders", f)
			}
			wantContains(t, o, "cuda", "cuInit(0) = 0")
		})
	}
}

// remapImage gives the image to the container's root (host uid 100000),
// as engines remap it for a user namespace.
func remapImage(t *testing.T, rootfs string) {
	t.Helper()
	err := filepath.WalkDir(rootfs, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, 100000, 100000)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestUserNamespaceWarmStart: a CDI hook in a container with a user
// namespace of its own (root mapped to host uid 100000, 65536 ids, as
// Kubernetes maps them) answers from the probe cache a hook running as
// root left: dxgsim sees no dxg call at all. It cannot write the cache,
// and never trusts one the namespace could have written: a file of the
// container's root (host uid 100000), or of its uid 65534 (host 165534,
// which stat shows as it shows root's), makes the start ask the host, and
// says why on syslog, where the hook logs from the namespace since it
// cannot open root's log file.
func TestUserNamespaceWarmStart(t *testing.T) {
	env(t)
	const profile = "nvidia-laptop"
	p, err := simhost.Lookup(profile)
	if err != nil {
		t.Fatal(err)
	}
	shared := t.TempDir()
	fixture.OpenToAll(t, shared)
	sysfs, cache, dev := filepath.Join(shared, "sys"), filepath.Join(shared, "cache"), filepath.Join(shared, "dev")
	for _, d := range []string{cache, dev} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := fixture.SysfsDevices(sysfs, p, nil, nil); err != nil {
		t.Fatal(err)
	}
	sock, received := fixture.Syslogd(t, shared)
	nvFolder := folder(t, profile, simhost.FolderNVIDIA).Folder
	start := func(t *testing.T, userns bool) (*outcome, simReport, []string) {
		t.Helper()
		o := runBox(t, box{
			image:  imageDebian,
			sim:    &simulation{profile: profile, bindHost: true},
			cdi:    []string{"nvidia.com/gpu=all"},
			userns: userns, probeCache: cache, sysfs: sysfs, devDir: dev, syslog: sock,
			prepare: func(t *testing.T, rootfs string) {
				fixture.OpenToAll(t, filepath.Dir(rootfs))
				if userns {
					remapImage(t, rootfs)
				}
			},
			// No dxg call from the container: what dxgsim counts is the hook's.
			checks: []check{{"dxg", "fsprobe open-rw /dev/dxg"}, {"folders", "ls /usr/lib/wsl/drivers"}},
		})
		o.started(t)
		wantOutput(t, o, "dxg", "open-rw /dev/dxg: ok")
		wantContains(t, o, "folders", nvFolder)
		var r simReport
		if err := json.Unmarshal([]byte(o.report), &r); err != nil {
			t.Fatalf("dxgsim report: %v\n%s", err, o.report)
		}
		return o, r, received()
	}
	cold := func(t *testing.T, r simReport) {
		t.Helper()
		if len(r.Calls) == 0 || r.ProcessesCreated != 1 {
			t.Errorf("a start that must ask the host made dxg calls %v, %d process objects; want some, one", r.Calls, r.ProcessesCreated)
		}
	}
	warm := func(t *testing.T, r simReport) {
		t.Helper()
		if len(r.Calls) != 0 || r.ProcessesCreated != 0 {
			t.Errorf("a warm start made dxg calls %v and %d process objects, want none", r.Calls, r.ProcessesCreated)
		}
	}
	t.Run("a user namespace alone cannot write the cache", func(t *testing.T) {
		_, r, logged := start(t, true)
		cold(t, r)
		if files, _ := filepath.Glob(filepath.Join(cache, probecache.Glob)); len(files) != 0 {
			t.Errorf("the hook in a user namespace wrote %v", files)
		}
		if len(logged) != 0 {
			t.Errorf("syslog got %q, want nothing", logged)
		}
	})
	var file string
	t.Run("root's cache serves the user namespace", func(t *testing.T) {
		_, r, _ := start(t, false)
		cold(t, r)
		files, _ := filepath.Glob(filepath.Join(cache, probecache.Glob))
		if len(files) != 1 {
			t.Fatalf("cache files %v, want one", files)
		}
		file = files[0]
		for range 2 {
			_, r, logged := start(t, true)
			warm(t, r)
			if len(logged) != 0 {
				t.Errorf("syslog got %q, want nothing", logged)
			}
		}
	})
	for _, planted := range []struct {
		name string
		uid  int
		want string
	}{
		{"planted by the container's root", 100000, file + " is owned by uid 0 of the namespace: not trusted in a user namespace"},
		{"planted by the container's nobody", 165534, file + " is owned by uid 65534 of the namespace: not trusted in a user namespace"},
	} {
		t.Run(planted.name, func(t *testing.T) {
			if file == "" {
				t.Skip("no cache file")
			}
			if err := os.Chown(file, planted.uid, planted.uid); err != nil {
				t.Fatal(err)
			}
			defer os.Chown(file, 0, 0)
			_, r, logged := start(t, true)
			cold(t, r)
			want := `<28>wsl-gpu-hook: level=warning msg="host probe cache not used: ` + planted.want + `"`
			if len(logged) != 1 || !strings.HasPrefix(logged[0], want) {
				t.Errorf("syslog got %q, want one line starting %q", logged, want)
			}
		})
	}
	t.Run("root's again", func(t *testing.T) {
		_, r, _ := start(t, true)
		warm(t, r)
	})
}
