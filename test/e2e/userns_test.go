package e2e

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
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
					for d := filepath.Dir(rootfs); d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
						if err := os.Chmod(d, 0o755); err != nil {
							t.Fatal(err)
						}
					}
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
// hook with no argument) fails the start with one line saying what to do.
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
			o := runBox(t, box{
				image: imageDebian,
				// runc binds the host's /dev/dxg into a user namespace: the
				// simulated node must sit at the real path.
				sim:           &simulation{profile: "nvidia-laptop", bindHost: true},
				cdi:           tt.cdi,
				cdiLegacyHook: tt.legacy,
				userns:        true,
				configMode:    0o600,
				prepare: func(t *testing.T, rootfs string) {
					// The mapped root reaches the root filesystem, not
					// config.json, and owns the image, as engines remap it.
					for d := filepath.Dir(rootfs); d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
						if err := os.Chmod(d, 0o755); err != nil {
							t.Fatal(err)
						}
					}
					err := filepath.WalkDir(rootfs, func(p string, _ fs.DirEntry, err error) error {
						if err != nil {
							return err
						}
						return os.Lchown(p, 100000, 100000)
					})
					if err != nil {
						t.Fatal(err)
					}
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
				return
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
