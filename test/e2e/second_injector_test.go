package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/fixture"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/simhost"
)

// TestSecondInjector runs the OCI hook on containers an engine already
// edited. A CDI device puts /dev/dxg in linux.devices and mounts the lib
// dir and its driver folders; the hooks.d or Docker --gpus hook still runs
// when the annotation or NVIDIA_VISIBLE_DEVICES asks (the annotation
// outranks the CDI spec's WSL_GPU_DEVICES=void). What stops a second
// injection is the spec itself: the hook leaves a container whose spec has
// both alone. The wrapper's spec has the node but no mounts: there the hook
// does the mounts.
func TestSecondInjector(t *testing.T) {
	h := env(t)
	fx := h.needFixture(t, "nvidia-laptop")
	nv := folder(t, "nvidia-laptop", simhost.FolderNVIDIA)
	intel := folder(t, "nvidia-laptop", simhost.FolderIntel)
	major, minor := int64(10), int64(229)
	mode := os.FileMode(0o666)
	node := []specs.LinuxDevice{{Path: "/dev/dxg", Type: "c", Major: major, Minor: minor, FileMode: &mode}}
	rules := []specs.LinuxDeviceCgroup{{Allow: true, Type: "c", Major: &major, Minor: &minor, Access: "rwm"}}
	opts := []string{"ro", "nosuid", "nodev", "rbind", "rprivate"}
	// What `--device wsl-gpu-hook.dev/gpu=nvidia` adds.
	cdiMounts := []specs.Mount{
		{Destination: "/usr/lib/wsl/lib", Type: "bind", Source: filepath.Join(fx, fixture.LibDir), Options: opts},
		{Destination: "/usr/lib/wsl/drivers/" + nv.Folder, Type: "bind", Source: filepath.Join(fx, fixture.DriversDir, nv.Folder), Options: opts},
	}
	tests := []struct {
		name   string
		mounts []specs.Mount
		// hookMounts: the hook gives the GPU (all: the Intel folder too).
		hookMounts bool
	}{
		{name: "CDI device, hook asked by annotation", mounts: cdiMounts},
		{name: "wrapper: node only", hookMounts: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := runBox(t, box{
				image:       imageBusybox,
				sim:         &simulation{profile: "nvidia-laptop"},
				hook:        hookConfig,
				annotations: map[string]string{"wsl-gpu-hook/devices": "all"},
				env:         []string{"WSL_GPU_DEVICES=void"}, // the CDI spec's
				devices:     node,
				rules:       rules,
				mounts:      tt.mounts,
				checks: []check{
					{"dxg", "fsprobe open-rw /dev/dxg"},
					{"lib-mounts", "grep -c ' /usr/lib/wsl/lib ' /proc/self/mountinfo"},
					exists("intel", "/usr/lib/wsl/drivers/"+intel.Folder),
					exists("nvidia", "/usr/lib/wsl/drivers/"+nv.Folder+"/libcuda.so.1.1"),
				},
			})
			o.started(t)
			wantOutput(t, o, "dxg", "open-rw /dev/dxg: ok")
			wantOutput(t, o, "lib-mounts", "1")
			wantOutput(t, o, "nvidia", "present")
			skipped := strings.Contains(o.hookLog, "the container has the GPU already")
			if tt.hookMounts {
				wantOutput(t, o, "intel", "present")
				if skipped || !strings.Contains(o.hookLog, "GPU ready") {
					t.Errorf("the hook did not give the GPU:\n%s", o.hookLog)
				}
				return
			}
			wantOutput(t, o, "intel", "absent")
			if !skipped || strings.Contains(o.hookLog, "plan:") {
				t.Errorf("the hook did not leave the CDI container alone:\n%s", o.hookLog)
			}
		})
	}
}
