package gpustats

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/driverstore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/dxcore"
)

func TestBusyRatio(t *testing.T) {
	tests := []struct {
		name            string
		last, cur, dt   float64
		want            float64
		wantErrContains string
	}{
		{"three quarters", 10, 10.75, 1, 0.75, ""},
		{"idle", 5, 5, 2, 0, ""},
		{"rounding above 1 is clamped", 0, 1.01, 1, 1, ""},
		{"backwards", 10, 4, 1, 0, "running time went backwards by 6.000 s (adapter reset?)"},
		{"faster than time", 0, 3, 1, 0, "running time grew 3.000 s in 1.000 s of wall time: the host's counter is broken"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := busyRatio(tt.last, tt.cur, tt.dt)
			if tt.wantErrContains != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErrContains) {
					t.Fatalf("err = %v, want %q", err, tt.wantErrContains)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("busy = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

func TestParseCgroup(t *testing.T) {
	const (
		id    = "4f3c2b1a0e9d8c7b6a5f4e3d2c1b0a9f8e7d6c5b4a3f2e1d0c9b8a7f6e5d4c3b"
		other = "9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b"
		uid   = "1b2c3d4e-5f60-7182-93a4-b5c6d7e8f901"
		uid_  = "1b2c3d4e_5f60_7182_93a4_b5c6d7e8f901"
		user  = "/user.slice/user-1000.slice/user@1000.service"
	)
	tests := []struct {
		name, in, container, pod string
	}{
		// The shapes engines and the kubelet make.
		{"docker systemd", "0::/system.slice/docker-" + id + ".scope\n", "4f3c2b1a0e9d", ""},
		{"docker cgroupfs v1", "12:devices:/docker/" + id + "\n", "4f3c2b1a0e9d", ""},
		{"podman rootful systemd", "0::/machine.slice/libpod-" + id + ".scope/container\n", "4f3c2b1a0e9d", ""},
		{"podman rootful cgroupfs", "0::/libpod_parent/libpod-" + id + "\n", "4f3c2b1a0e9d", ""},
		{"kubelet systemd", "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + uid_ + ".slice/cri-containerd-" + id + ".scope\n", "4f3c2b1a0e9d", uid},
		{"kubelet systemd, guaranteed, CRI-O", "0::/kubepods.slice/kubepods-pod" + uid_ + ".slice/crio-" + id + ".scope\n", "4f3c2b1a0e9d", uid},
		{"kubelet systemd under kind's cgroup root", "0::/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-burstable.slice/kubelet-kubepods-burstable-pod" + uid_ + ".slice/cri-containerd-" + id + ".scope\n", "4f3c2b1a0e9d", uid},
		{"kubelet cgroupfs", "0::/kubepods/besteffort/pod" + uid + "/" + id + "\n", "4f3c2b1a0e9d", uid},
		{"kubelet cgroupfs under a cgroup root", "0::/wgk-1-n0/kubepods/pod" + uid + "/" + id + "\n", "4f3c2b1a0e9d", uid},
		{"kubelet cgroupfs, CRI-O", "0::/kubepods/burstable/pod" + uid + "/crio-" + id + "\n", "4f3c2b1a0e9d", uid},
		// A reader in a cgroup namespace of its own (a pod) sees paths
		// from its root, ".." up.
		{"from another pod's cgroup namespace", "0::/../../kubepods-besteffort-pod" + uid_ + ".slice/cri-containerd-" + id + ".scope\n", "4f3c2b1a0e9d", uid},
		{"from a sibling container's cgroup namespace", "0::/../docker-" + id + ".scope\n", "4f3c2b1a0e9d", ""},
		{"a kind node seen from the host: the node, no pod", "0::/system.slice/docker-" + id + ".scope/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-pod" + uid_ + ".slice/cri-containerd-" + other + ".scope\n", "4f3c2b1a0e9d", ""},
		{"host process", "0::/user.slice/user-0.slice/session-3.scope\n", "", ""},

		// A user's delegated subtree (systemd --user; rootless podman
		// makes its containers there): the user names its cgroups, so
		// nothing there is an engine's word.
		{"a user's cgroup named like a docker scope", "0::" + user + "/app.slice/docker-" + id + ".scope\n", "", ""},
		{"a user's cgroup named like a kubelet pod", "0::" + user + "/kubepods.slice/kubepods-pod" + uid_ + ".slice/cri-containerd-" + id + ".scope\n", "", ""},
		{"a user's cgroupfs-like path", "0::" + user + "/docker/" + id + "\n", "", ""},
		{"rootless podman", "0::" + user + "/user.slice/libpod-" + id + ".scope/container\n", "", ""},
		{"a user's subtree seen from a pod's namespace", "0::/../../../.." + user + "/app.slice/docker-" + id + ".scope\n", "", ""},
		{"cgroup v1: the user's name=systemd line", "1:name=systemd:" + user + "/docker-" + id + ".scope\n2:cpu,cpuacct:/user.slice\n", "", ""},
		{"a delegated system service", "0::/system.slice/ci.service/docker/" + id + "\n", "", ""},
		// Ids elsewhere, or in shapes no engine makes.
		{"an id under any directory", "0::/anything/" + id + "\n", "", ""},
		{"an id at the root", "0::/" + id + "\n", "", ""},
		{"a docker scope outside a slice", "0::/anything/docker-" + id + ".scope\n", "", ""},
		{"a scope under a session", "0::/user.slice/user-1000.slice/session-2.scope/docker-" + id + ".scope\n", "", ""},
		{"an id inside a longer name", "0::/system.slice/mydocker-" + id + ".scope\n", "", ""},
		{"a pod uid inside a longer name", "0::/kubepods/besteffort/xpod" + uid + "x/" + id + "\n", "", ""},
		// A container can make cgroups below its own: the outermost id
		// is the engine's, the container's own.
		{"a container's child named after another", "0::/system.slice/docker-" + id + ".scope/docker-" + other + ".scope\n", "4f3c2b1a0e9d", ""},
		{"a pod container's children named after another pod", "0::/kubepods/besteffort/pod" + uid + "/" + id + "/pod9a8b7c6d-5e4f-3a2b-1c0d-9e8f7a6b5c4d/" + other + "\n", "4f3c2b1a0e9d", uid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, p := ParseCgroup(tt.in)
			if c != tt.container || p != tt.pod {
				t.Errorf("got %q %q, want %q %q", c, p, tt.container, tt.pod)
			}
		})
	}
}

func TestParseNSPidAndAmbiguity(t *testing.T) {
	if n := parseNSPid(strings.NewReader("Name:\tx\nNSpid:\t4242\t17\t1\n")); n != 1 {
		t.Errorf("innermost pid = %d, want 1", n)
	}
	ps := []Process{{PID: 30, NSPID: 1}, {PID: 20, NSPID: 1}, {PID: 10, NSPID: 10}}
	markAmbiguous(ps)
	if ps[0].PID != 10 || ps[0].Ambiguous || !ps[1].Ambiguous || !ps[2].Ambiguous {
		t.Errorf("marked %+v", ps)
	}
}

func TestKind(t *testing.T) {
	for _, tt := range []struct {
		n    dxcore.Node
		want string
	}{
		{dxcore.Node{Type: dxcore.Engine3D, Name: "3D"}, "3d"},
		{dxcore.Node{Type: dxcore.EngineOther, Name: "Compute_0"}, "compute"},
		{dxcore.Node{Type: dxcore.EngineOther, Name: "Cuda"}, "compute"},
		{dxcore.Node{Type: dxcore.EngineCopy, Name: "Copy"}, "copy"},
		{dxcore.Node{Type: dxcore.EngineVideoEncode, Name: "Video Encode"}, "video_encode"},
		{dxcore.Node{Type: dxcore.EngineOther, Name: "GDI Render"}, "other"},
	} {
		if got := Kind(tt.n); got != tt.want {
			t.Errorf("Kind(%+v) = %q, want %q", tt.n, got, tt.want)
		}
	}
}

func TestHealthErrors(t *testing.T) {
	gone := dxcore.LUID{Low: 0x4486d1}
	got, err := healthErrors(map[dxcore.LUID]error{gone: errors.New("LX_DXQUERYSTATISTICS: no such device")})
	if err != nil || len(got) != 1 || got[gone].Error() != "GPU statistics query failed: LX_DXQUERYSTATISTICS: no such device" {
		t.Errorf("removed adapter: %v, %v", got, err)
	}
	// An old kernel makes no adapter unhealthy.
	got, err = healthErrors(map[dxcore.LUID]error{gone: fmt.Errorf("x: %w", dxcore.ErrStatsUnsupported)})
	if len(got) != 0 || !errors.Is(err, dxcore.ErrStatsUnsupported) {
		t.Errorf("old kernel: %v, %v", got, err)
	}
}

func TestHealthCheckNeverStallsTheCaller(t *testing.T) {
	release := make(chan struct{})
	c := &HealthCheck{Device: "/dev/dxg", Timeout: 50 * time.Millisecond, check: func(string) (map[dxcore.LUID]error, error) {
		<-release
		return nil, nil
	}}
	inv := &driverstore.Inventory{Adapters: []driverstore.Adapter{{}}}
	start := time.Now()
	err := c.Mark(inv)
	if err == nil || !strings.Contains(err.Error(), "did not answer within 50ms") || time.Since(start) > time.Second {
		t.Fatalf("hung check: %v after %v", err, time.Since(start))
	}
	if err := c.Mark(inv); err == nil || !strings.Contains(err.Error(), "has not returned yet") {
		t.Errorf("second check while the first hangs: %v", err)
	}
	close(release)
	for c.inFlight.Load() {
		time.Sleep(time.Millisecond)
	}
	gone := dxcore.LUID{Low: 7}
	inv.Adapters[0].LUID = gone
	c.check = func(string) (map[dxcore.LUID]error, error) {
		return map[dxcore.LUID]error{gone: errors.New("removed")}, nil
	}
	if err := c.Mark(inv); err != nil || inv.Adapters[0].Err == nil {
		t.Errorf("after the host answered again: %v, adapter err %v", err, inv.Adapters[0].Err)
	}
}
