package e2e

import (
	"strings"
	"testing"

	mi "github.com/moby/sys/mountinfo"
)

// TestHookTwice: the hook configured at two stages of one container, as
// real setups do (Docker's --gpus hook next to the wrapper's, hooks.d next
// to a CDI device, NVIDIA's hook next to ours). The second run finds the
// GPU given and changes nothing: one mount per path, the loader cache
// written once, and the container starts with a working GPU.
func TestHookTwice(t *testing.T) {
	env(t)
	tests := []struct {
		name   string
		stages []string
	}{
		{name: "prestart then prestart", stages: []string{"prestart", "prestart"}},
		{name: "prestart then createRuntime", stages: []string{"prestart", "createRuntime"}},
		{name: "createRuntime then createContainer", stages: []string{"createRuntime", "createContainer"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o := runBox(t, box{
				image: imageDebian, sim: &simulation{profile: "nvidia-laptop"},
				hook: hookConfig, stage: tt.stages[0], alsoStages: tt.stages[1:],
				env: []string{"WSL_GPU_DEVICES=all"},
				checks: []check{
					{"mounts", "cat /proc/self/mountinfo"},
					{"cudaprobe", "cudaprobe"},
					{"dxg", "fsprobe open-rw /dev/dxg"},
				},
			})
			o.started(t)
			o.succeeds(t, "cudaprobe")
			wantOutput(t, o, "dxg", "open-rw /dev/dxg: ok")
			infos, err := mi.GetMountsFromReader(strings.NewReader(o.result(t, "mounts").out), nil)
			if err != nil {
				t.Fatal(err)
			}
			counts := map[string]int{}
			for _, m := range infos {
				if strings.HasPrefix(m.Mountpoint, "/usr/lib/wsl/") || m.Mountpoint == "/dev/dxg" {
					counts[m.Mountpoint]++
				}
			}
			if len(counts) == 0 {
				t.Fatalf("no WSL mount in the container:\n%s", o.result(t, "mounts").out)
			}
			for p, n := range counts {
				if n != 1 {
					t.Errorf("%s is mounted %d times", p, n)
				}
			}
			if log := o.hookLog; strings.Count(log, "keep /etc/ld.so.cache: already up to date") != 1 {
				t.Errorf("the second run rewrote the loader cache; hook log:\n%s", log)
			}
		})
	}
}
