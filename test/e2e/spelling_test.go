package e2e

import (
	"slices"
	"strings"
	"testing"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/driverstore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/simhost"
)

// TestRegistrySpelling: the intel-npu host's registry names the NPU's
// folder KIPUDRV.INF_AMD64_..., the folder on disk is lower case. On the
// host the drivers dir is a Windows share and finds either; in the
// container the mount is case-sensitive, and the NPU's user-mode driver
// builds its path from the registry's spelling (libdxg keeps the case). So
// the folder must answer under the registry's spelling, read-only, and
// the on-disk name must still resolve.
func TestRegistrySpelling(t *testing.T) {
	env(t)
	const profile = "intel-npu"
	npu := folder(t, profile, simhost.FolderNPU)
	spelled, err := driverstore.FolderName(npu.DriverStorePath)
	if err != nil {
		t.Fatal(err)
	}
	if spelled == npu.Folder {
		t.Fatalf("profile %s no longer spells the NPU folder differently from the registry (%s): the test tests nothing", profile, spelled)
	}
	o := runBox(t, box{
		image: imageBusybox,
		sim:   &simulation{profile: profile},
		hook:  hookConfig,
		env:   []string{"WSL_GPU_DEVICES=all"},
		checks: []check{
			{"registry", "ls " + ctrDrivers + "/" + spelled},
			{"disk", "ls " + ctrDrivers + "/" + npu.Folder},
			{"mounts", "cat /proc/self/mountinfo"},
			{"write", "fsprobe create " + ctrDrivers + "/" + spelled + "/x"},
		},
	})
	o.started(t)
	reg := strings.TrimSpace(o.succeeds(t, "registry"))
	if reg == "" {
		t.Fatalf("the folder under the registry's spelling %s is empty in the container", spelled)
	}
	if disk := strings.TrimSpace(o.succeeds(t, "disk")); disk != reg {
		t.Errorf("the on-disk name %s lists\n%s\nthe registry's spelling lists\n%s", npu.Folder, disk, reg)
	}
	if opts := mountOptions(o.result(t, "mounts").out, ctrDrivers+"/"+spelled); !slices.Contains(strings.Split(opts, ","), "ro") {
		t.Errorf("%s/%s is not a read-only mount (options %q)", ctrDrivers, spelled, opts)
	}
	if r := o.result(t, "write"); r.code == 0 {
		t.Errorf("created a file in the NPU's driver folder: %s", r.out)
	}
}
