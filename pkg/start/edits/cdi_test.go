package edits_test

import (
	"reflect"
	"testing"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/driverstore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/capability"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/edits"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/vendorstack"
)

// TestCDIStack: a vendor stack's edits as CDI: its binds read-only, its
// nodes rw and 0666 with their numbers, its variables (moved here from
// vendorstack's CDIEdits with the same assertions).
func TestCDIStack(t *testing.T) {
	radeon := vendorstack.Adapter{Index: 0, Vendor: driverstore.AMD, Description: "AMD Radeon RX 7900 XTX"}
	rocm := vendorstack.ROCm{Dir: "/opt/rocm", Lib: "/opt/rocm/lib/librocdxg.so.1", Share: "/opt/rocm/share/rocdxg"}
	dri := []vendorstack.Node{{Name: "card0", HostPath: "/dev/dri/card0", Major: 226, Minor: 0}, {Name: "renderD128", HostPath: "/dev/dri/renderD128", Major: 226, Minor: 128}}
	s := vendorstack.Plan(vendorstack.Input{Host: []vendorstack.Adapter{radeon}, Selected: []vendorstack.Adapter{radeon}, All: true, Caps: capability.Compute | capability.Video | capability.Display,
		Probe: vendorstack.Host{ROCm: rocm, DRI: dri, WSLg: vendorstack.WSLg{Dir: "/mnt/wslg", X11: "/mnt/wslg/.X11-unix", Display: 0}}})
	var e edits.Edits
	e.AddStack(s, false)
	c := e.CDI()
	if len(c.Mounts) != 4 || c.Mounts[0].HostPath != rocm.Lib || c.Mounts[0].ContainerPath != vendorstack.ContainerRocdxg ||
		!reflect.DeepEqual(c.Mounts[3].Options, []string{"ro", "nosuid", "nodev", "rbind", "rprivate"}) {
		t.Errorf("mounts: %+v", c.Mounts)
	}
	if len(c.DeviceNodes) != 2 || c.DeviceNodes[1].Path != "/dev/dri/renderD128" || c.DeviceNodes[1].Major != 226 || c.DeviceNodes[1].Minor != 128 ||
		c.DeviceNodes[1].Type != "c" || c.DeviceNodes[1].Permissions != "rw" || *c.DeviceNodes[1].FileMode != 0o666 {
		t.Errorf("device nodes: %+v", c.DeviceNodes[1])
	}
	if want := []string{"HSA_ENABLE_DXG_DETECTION=1", "LIBVA_DRIVER_NAME=d3d12", "DISPLAY=:0"}; !reflect.DeepEqual(c.Env, want) {
		t.Errorf("env = %q, want %q", c.Env, want)
	}
	if c := (edits.Edits{}).CDI(); c.Env != nil || c.Mounts != nil || c.DeviceNodes != nil || c.Hooks != nil {
		t.Errorf("empty edits gave %+v", c)
	}
}
