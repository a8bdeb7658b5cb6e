package gpuplan

import (
	"reflect"
	"strings"
	"testing"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/devnode"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/driverstore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/dxcore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/probed"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/capability"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/ldcache"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/mounts"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/vendorstack"
)

const amdFolder = "u0398975.inf_amd64_3"

// desktop is an AMD GPU with a usable folder and a host with librocdxg,
// /dev/dri and WSLg.
func desktop() probed.Host {
	h := laptop()
	h.Inventory.Adapters = []driverstore.Adapter{{Adapter: dxcore.Adapter{Index: 0, LUID: dxcore.LUID{Low: 0x100}, Description: "AMD Radeon RX 7900 XTX"},
		Vendor: driverstore.AMD, Folder: amdFolder}}
	h.NvidiaSmi = driverstore.NvidiaSmi{}
	h.Stack = vendorstack.Host{
		ROCm: vendorstack.ROCm{Dir: "/opt/rocm", Lib: "/opt/rocm/lib/librocdxg.so.1", Share: "/opt/rocm/share/rocdxg"},
		DRI:  []vendorstack.Node{{Name: "renderD128", HostPath: "/dev/dri/renderD128", Major: 226, Minor: 128}},
		WSLg: vendorstack.WSLg{Dir: "/mnt/wslg", X11: "/mnt/wslg/.X11-unix", Display: 0},
	}
	return h
}

// stackSummary is the steps a plan adds beyond the folders' plan.
func stackSummary(p Plan) []string {
	var out []string
	for _, s := range p.Steps {
		switch s.Kind {
		case mounts.BindFile, mounts.Bind, mounts.Device:
			if strings.HasPrefix(s.Target, "/usr/lib/wsl") || s.Target == "/dev/dxg" {
				continue
			}
			line := string(s.Kind) + " " + s.Target + " <- " + s.Source
			if s.BindNode {
				line += " bound"
			}
			out = append(out, line)
		}
	}
	return out
}

func TestDecideStack(t *testing.T) {
	rocdxg := []string{
		"bind-file /usr/lib/librocdxg.so.1 <- /opt/rocm/lib/librocdxg.so.1",
		"bind-file /usr/lib/librocdxg.so <- /opt/rocm/lib/librocdxg.so.1",
		"bind /usr/share/rocdxg <- /opt/rocm/share/rocdxg",
	}
	render := "device /dev/dri/renderD128 <- /dev/dri/renderD128"
	x11 := "bind /tmp/.X11-unix <- /mnt/wslg/.X11-unix"
	tests := []struct {
		name      string
		c         Container
		host      func(h *probed.Host)
		want      []string
		wantNodes []devnode.Node
		wantEnv   []string
		// rocdxgCache: the loader-cache step registers librocdxg.so.1.
		rocdxgCache bool
	}{
		{
			name:        "prestart amd: librocdxg bound, its variable for the user to set",
			c:           Container{Stage: Prestart, Pid: 7},
			want:        rocdxg,
			wantEnv:     []string{"HSA_ENABLE_DXG_DETECTION=1"},
			rocdxgCache: true,
		},
		{
			name:        "video and display add nodes, their cgroup step and the sockets",
			c:           Container{Stage: Prestart, Pid: 7, Caps: capability.Video | capability.Display},
			want:        append(append([]string{render}, rocdxg...), x11),
			wantNodes:   []devnode.Node{{Path: "/dev/dri/renderD128", Major: 226, Minor: 128}},
			wantEnv:     []string{"HSA_ENABLE_DXG_DETECTION=1", "LIBVA_DRIVER_NAME=d3d12", "DISPLAY=:0"},
			rocdxgCache: true,
		},
		{
			name:        "a user namespace gets the host's nodes bound",
			c:           Container{Stage: Prestart, Pid: 7, Caps: capability.Video, UserNamespace: true},
			want:        append([]string{render + " bound"}, rocdxg...),
			wantNodes:   []devnode.Node{{Path: "/dev/dri/renderD128", Major: 226, Minor: 128}},
			wantEnv:     []string{"HSA_ENABLE_DXG_DETECTION=1", "LIBVA_DRIVER_NAME=d3d12"},
			rocdxgCache: true,
		},
		{
			name:        "the wrapper's nodes in a user namespace are the runtime's",
			c:           Container{Stage: Prestart, Pid: 7, Caps: capability.Video, UserNamespace: true, RuntimeNode: true},
			want:        rocdxg,
			wantNodes:   []devnode.Node{{Path: "/dev/dri/renderD128", Major: 226, Minor: 128}},
			wantEnv:     []string{"HSA_ENABLE_DXG_DETECTION=1", "LIBVA_DRIVER_NAME=d3d12"},
			rocdxgCache: true,
		},
		{
			name:        "the CDI hook: the engine applied the devices' edits, the cache entry is left",
			c:           Container{Stage: CreateContainer, Injected: true, Caps: capability.Video, RuntimeNode: true, LibDirMounted: true},
			rocdxgCache: true,
		},
		{
			name: "no librocdxg on the host: nothing but a note",
			c:    Container{Stage: Prestart, Pid: 7},
			host: func(h *probed.Host) { h.Stack.ROCm = vendorstack.ROCm{Dir: "/opt/rocm", Err: vendorstack.ErrNoRocdxg} },
		},
		{
			name: "loader cache left alone: no entry either",
			c:    Container{Stage: Prestart, Pid: 7},
			host: func(h *probed.Host) { h.Ldcache = nil },
			want: rocdxg, wantEnv: []string{"HSA_ENABLE_DXG_DETECTION=1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := desktop()
			if tt.host != nil {
				tt.host(&h)
			}
			tt.c.Request = req(t, "WSL_GPU_DEVICES=all")
			p, err := Decide(tt.c, h)
			if err != nil {
				t.Fatal(err)
			}
			if got := stackSummary(p); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("steps\n%q\nwant\n%q", got, tt.want)
			}
			if !reflect.DeepEqual(p.Nodes, tt.wantNodes) {
				t.Errorf("nodes %+v, want %+v", p.Nodes, tt.wantNodes)
			}
			env := p.Stack.EnvList()
			if len(env) == 0 {
				env = nil
			}
			if !reflect.DeepEqual(env, tt.wantEnv) {
				t.Errorf("env %q, want %q", env, tt.wantEnv)
			}
			var gotCache bool
			for _, s := range p.Steps {
				if s.Kind == mounts.Ldcache {
					for _, e := range s.Entries {
						gotCache = gotCache || e == (ldcache.Entry{Key: "librocdxg.so.1", Path: "/usr/lib/librocdxg.so.1", Flags: ldcache.FlagNative})
					}
				}
			}
			if gotCache != tt.rocdxgCache {
				t.Errorf("librocdxg cache entry: %v, want %v", gotCache, tt.rocdxgCache)
			}
			if strings.Contains(tt.name, "no librocdxg") && !strings.Contains(strings.Join(p.Stack.Notes, "\n"), "no librocdxg at /opt/rocm/lib/librocdxg.so.1") {
				t.Errorf("notes %q lack the missing librocdxg", p.Stack.Notes)
			}
		})
	}
}

func TestPlanStringNamesEveryNode(t *testing.T) {
	h := desktop()
	p, err := Decide(Container{Stage: Prestart, Pid: 7, Caps: capability.Video, Request: req(t, "WSL_GPU_DEVICES=all")}, h)
	if err != nil {
		t.Fatal(err)
	}
	if s := p.String(); !strings.HasPrefix(s, "cgroup c 10:63, c 226:128: allow in the container's device cgroup; ") || !strings.Contains(s, "bind file /opt/rocm/lib/librocdxg.so.1 -> /usr/lib/librocdxg.so.1") {
		t.Errorf("plan: %s", s)
	}
}
