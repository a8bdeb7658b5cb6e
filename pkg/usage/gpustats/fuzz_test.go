package gpustats

import (
	"math"
	"strings"
	"testing"
)

// Whatever two readings the host gives, a busy ratio is in [0, 1] or an
// error: never negative, never above 100%, never NaN.
func FuzzBusyRatio(f *testing.F) {
	f.Add(10.0, 10.75, 1.0)
	f.Add(10.0, 4.0, 1.0)
	f.Add(0.0, 1e300, 1e-9)
	f.Fuzz(func(t *testing.T, last, cur, dt float64) {
		if dt <= 0 || math.IsNaN(dt) || math.IsInf(dt, 0) {
			return // the sampler only divides by a positive elapsed time
		}
		v, err := busyRatio(last, cur, dt)
		if err == nil && (v < 0 || v > 1 || math.IsNaN(v)) {
			t.Errorf("busyRatio(%v, %v, %v) = %v", last, cur, dt, v)
		}
	})
}

// Any cgroup file gives a 12-hex-digit container id or none, and a UUID
// pod or none.
func FuzzParseCgroup(f *testing.F) {
	f.Add("0::/system.slice/docker-4f3c2b1a0e9d8c7b6a5f4e3d2c1b0a9f8e7d6c5b4a3f2e1d0c9b8a7f6e5d4c3b.scope\n")
	f.Add("0::/kubepods/besteffort/pod1b2c3d4e-5f60-7182-93a4-b5c6d7e8f901/x\n")
	f.Fuzz(func(t *testing.T, s string) {
		c, p := ParseCgroup(s)
		if c != "" && (len(c) != 12 || strings.Trim(c, "0123456789abcdef") != "") {
			t.Errorf("container %q", c)
		}
		if p != "" && len(p) != 36 {
			t.Errorf("pod %q", p)
		}
	})
}

// Whatever a user makes in its delegated subtree (systemd --user), its
// processes carry no container id: a cgroup named after another
// container's id must not have their GPU memory reported as that pod's.
func FuzzParseCgroupUnderAUser(f *testing.F) {
	f.Add("/app.slice/docker-4f3c2b1a0e9d8c7b6a5f4e3d2c1b0a9f8e7d6c5b4a3f2e1d0c9b8a7f6e5d4c3b.scope")
	f.Add("/kubepods/besteffort/pod1b2c3d4e-5f60-7182-93a4-b5c6d7e8f901/4f3c2b1a0e9d8c7b6a5f4e3d2c1b0a9f8e7d6c5b4a3f2e1d0c9b8a7f6e5d4c3b")
	f.Fuzz(func(t *testing.T, below string) {
		// A cgroup's name holds no "\n" (cgroup_mkdir refuses it, to keep
		// /proc/PID/cgroup parseable), and below is beneath the user's.
		if strings.Contains(below, "\n") {
			return
		}
		below = "/" + below
		for _, root := range []string{"0::/user.slice/user-1000.slice/user@1000.service", "0::/../../user.slice/user-1000.slice/user@1000.service"} {
			if c, p := ParseCgroup(root + below); c != "" || p != "" {
				t.Errorf("ParseCgroup(%q) = %q, %q: taken from a user's own cgroups", root+below, c, p)
			}
		}
	})
}
