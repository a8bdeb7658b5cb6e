package e2e

import (
	"os"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// The simulated node dxgsim makes. 10:229 is /dev/fuse on a plain Linux
// host: a driver that always opens, so the device cgroup, not a missing
// driver, is what a failed open shows.
const (
	dxgMajor = 10
	dxgMinor = 229
)

func dxgDevice() specs.LinuxDevice {
	mode := os.FileMode(0o666)
	uid, gid := uint32(0), uint32(0)
	return specs.LinuxDevice{Path: "/dev/dxg", Type: "c", Major: dxgMajor, Minor: dxgMinor, FileMode: &mode, UID: &uid, GID: &gid}
}

func dxgAllowRule() specs.LinuxDeviceCgroup {
	major, minor := int64(dxgMajor), int64(dxgMinor)
	return specs.LinuxDeviceCgroup{Allow: true, Type: "c", Major: &major, Minor: &minor, Access: "rwm"}
}

// TestWithoutHook pins what the hook's tests stand on: with no hook a
// container has no /dev/dxg even when the host has one, and a /dev/dxg
// node in a container is usable only with a device cgroup rule, also
// under the simulator (whose node would otherwise prove nothing about the
// rule the hook adds).
func TestWithoutHook(t *testing.T) {
	env(t)
	laptop := &simulation{profile: "nvidia-laptop"}
	tests := []struct {
		name    string
		sim     *simulation
		devices []specs.LinuxDevice
		rules   []specs.LinuxDeviceCgroup
		// want is what `fsprobe open-rw /dev/dxg` prints after the path.
		want string
	}{
		{name: "no hook, plain host", want: "ENOENT"},
		{name: "no hook, simulated GPU host", sim: laptop, want: "ENOENT"},
		{name: "node without cgroup rule", devices: []specs.LinuxDevice{dxgDevice()}, want: "EPERM"},
		{name: "node without cgroup rule, simulated", sim: laptop, devices: []specs.LinuxDevice{dxgDevice()}, want: "EPERM"},
		// With the rule the open reaches the driver (fuse on a plain host).
		{name: "node with cgroup rule, plain host", devices: []specs.LinuxDevice{dxgDevice()}, rules: []specs.LinuxDeviceCgroup{dxgAllowRule()}, want: "ok"},
		{name: "node with cgroup rule, simulated", sim: laptop, devices: []specs.LinuxDevice{dxgDevice()}, rules: []specs.LinuxDeviceCgroup{dxgAllowRule()}, want: "ok"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o := runBox(t, box{
				image:   imageBusybox,
				sim:     tt.sim,
				devices: tt.devices,
				rules:   tt.rules,
				checks:  []check{{"dxg-open", "fsprobe open-rw /dev/dxg"}},
			})
			o.started(t)
			got := o.result(t, "dxg-open").out
			if want := "open-rw /dev/dxg: " + tt.want; !strings.HasPrefix(got, want) {
				t.Errorf("in the container: %q, want %q...", got, want)
			}
		})
	}
}
