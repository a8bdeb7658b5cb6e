package e2e

import (
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
