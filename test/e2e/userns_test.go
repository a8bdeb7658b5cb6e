package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// TestUserNamespace runs the hook for a container in its own user
// namespace (root mapped to host uid 100000). The container either gets a
// working /dev/dxg or the start fails with the hook's one line naming the
// limitation; never a half-set-up container.
func TestUserNamespace(t *testing.T) {
	env(t)
	major, minor := int64(10), int64(229)
	mode := os.FileMode(0o666)
	tests := []struct {
		name     string
		inSpec   bool // /dev/dxg in linux.devices, as CDI and the wrapper put it
		wantFail string
	}{
		{name: "hook alone", wantFail: "the container runs in its own user namespace, where the hook cannot create /dev/dxg: request the GPU through CDI"},
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
			if tt.wantFail != "" {
				got, ok := hookStderr(o.stderr)
				if o.exitCode == 0 || !ok || !strings.HasPrefix(got, "wsl-gpu-hook: prestart: "+tt.wantFail) || strings.Count(strings.TrimSpace(got), "\n") != 0 {
					t.Fatalf("want one line naming the limitation, got\n%s", o.debug())
				}
				return
			}
			o.started(t)
			wantOutput(t, o, "dxg", "open-rw /dev/dxg: ok")
			wantOutput(t, o, "lib", "/usr/lib/wsl/lib/libdxcore.so")
		})
	}
}
