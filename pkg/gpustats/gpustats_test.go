package gpustats

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/driverstore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/dxcore"
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
	const id = "4f3c2b1a0e9d8c7b6a5f4e3d2c1b0a9f8e7d6c5b4a3f2e1d0c9b8a7f6e5d4c3b"
	tests := []struct {
		name, in, container, pod string
	}{
		{"docker systemd", "0::/system.slice/docker-" + id + ".scope\n", "4f3c2b1a0e9d", ""},
		{"docker cgroupfs v1", "12:devices:/docker/" + id + "\n", "4f3c2b1a0e9d", ""},
		{"podman", "0::/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-" + id + ".scope/container\n", "4f3c2b1a0e9d", ""},
		{"kubelet systemd", "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1b2c3d4e_5f60_7182_93a4_b5c6d7e8f901.slice/cri-containerd-" + id + ".scope\n",
			"4f3c2b1a0e9d", "1b2c3d4e-5f60-7182-93a4-b5c6d7e8f901"},
		{"kubelet cgroupfs", "0::/kubepods/besteffort/pod1b2c3d4e-5f60-7182-93a4-b5c6d7e8f901/" + id + "\n",
			"4f3c2b1a0e9d", "1b2c3d4e-5f60-7182-93a4-b5c6d7e8f901"},
		{"host process", "0::/user.slice/user-0.slice/session-3.scope\n", "", ""},
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
