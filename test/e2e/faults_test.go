package e2e

import (
	"strings"
	"testing"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/simhost"
)

// TestFaults injects faults under real runc starts: the simulator's dxg
// faults, damage to (a copy of) the Windows side's files, and a hook that
// finds no devices cgroup. A fault that leaves a usable GPU starts the
// container with what is left (and the log says what was skipped); one
// that leaves nothing for the request fails the start with the hook's one
// line, which names what is wrong and what to do. Either way no handle
// leaks (runBox fails on dxgsim's exit 3) and nothing reaches the host.
func TestFaults(t *testing.T) {
	env(t)
	nv := folder(t, "nvidia-laptop", simhost.FolderNVIDIA)
	intel := folder(t, "nvidia-laptop", simhost.FolderIntel)
	lib, drivers := "usr/lib/wsl/lib", "usr/lib/wsl/drivers"
	tests := []struct {
		name      string
		faults    []string
		breakHost func(t *testing.T, host string)
		noDevices bool
		request   string
		folders   []string // the container starts with exactly these
		wantErr   string   // or fails with a hook line containing this
		wantLog   string   // and the hook log says this
	}{
		{name: "old kernel", faults: []string{"old-kernel"}, request: "all", folders: []string{intel.Folder, nv.Folder}},
		{name: "NVIDIA query fails, all asked", faults: []string{"query-fail=1"}, request: "all", folders: []string{intel.Folder}, wantLog: "skipped adapter 1 (LUID 0x4486d1)"},
		{name: "query fails as raw NTSTATUS", faults: []string{"query-fail=0", "ntstatus"}, request: "all", folders: []string{nv.Folder}, wantLog: "STATUS_DEVICE_REMOVED"},
		{name: "NVIDIA folder gone, all asked", faults: []string{"missing-folder=1"}, request: "all", folders: []string{intel.Folder}, wantLog: "was not found under"},
		{name: "NVIDIA folder gone, nvidia asked", faults: []string{"missing-folder=1"}, request: "nvidia", wantErr: "the Windows driver was probably updated while WSL was running: run wsl --shutdown"},
		{name: "NVIDIA query fails, nvidia asked", faults: []string{"query-fail=1"}, request: "nvidia", wantErr: "GPU selector nvidia matches no adapter on this host"},
		{name: "zero adapters", faults: []string{"zero-adapters"}, request: "all", wantErr: "no GPU adapters: the Windows host exposes none to WSL"},
		{name: "lib dir missing", breakHost: replace(lib, gone), request: "all",
			wantErr: lib + " does not exist: WSL mounts its GPU libraries there"},
		{name: "lib dir is a file", breakHost: replace(lib, asFile), request: "all",
			wantErr: lib + " is not a directory: point lib_dir in the config at WSL's GPU library mount"},
		{name: "drivers dir missing", breakHost: replace(drivers, gone), request: "all",
			wantErr: drivers + " does not exist: WSL mounts it for GPU drivers"},
		{name: "NVIDIA folder is a file, all asked", breakHost: replace(drivers+"/"+nv.Folder, asFile), request: "all",
			folders: []string{intel.Folder}, wantLog: "is not a directory: refusing it"},
		{name: "NVIDIA folder is a link to /, nvidia asked", breakHost: replace(drivers+"/"+nv.Folder, toRoot), request: "nvidia",
			wantErr: "is a symlink: refusing it"},
		{name: "NVIDIA folder root only, all asked", breakHost: rootOnly(drivers + "/" + nv.Folder), request: "all",
			folders: []string{intel.Folder}, wantLog: "is not readable by everyone (mode 0700)"},
		{name: "NVIDIA folder root only, nvidia asked", breakHost: rootOnly(drivers + "/" + nv.Folder), request: "nvidia",
			wantErr: "is not readable by everyone (mode 0700), so a container whose user is not host root could not load the driver from it: make it readable by everyone (r-x)"},
		{name: "lib dir root only", breakHost: rootOnly(lib), request: "all",
			wantErr: lib + " is not readable by everyone (mode 0700)"},
		{name: "devices cgroup not mounted", noDevices: true, request: "all",
			wantErr: "but no cgroup v1 devices hierarchy is mounted here: run the hook in the host's mount namespace"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o := runBox(t, box{
				image:           imageBusybox,
				sim:             &simulation{profile: "nvidia-laptop", faults: tt.faults, breakHost: tt.breakHost},
				noDevicesCgroup: tt.noDevices,
				hook:            hookConfig,
				env:             []string{"WSL_GPU_DEVICES=" + tt.request},
				checks:          []check{{"drivers", "ls /usr/lib/wsl/drivers"}, {"dxg", "fsprobe open-rw /dev/dxg"}},
			})
			if tt.wantErr != "" {
				got, ok := hookStderr(o.stderr)
				if o.exitCode == 0 || !ok || !strings.Contains(got, tt.wantErr) || strings.Count(strings.TrimSpace(got), "\n") != 0 {
					t.Fatalf("want a failed start with one hook line containing %q\n%s", tt.wantErr, o.debug())
				}
				return
			}
			o.started(t)
			wantOutput(t, o, "drivers", strings.Join(tt.folders, "\n"))
			wantOutput(t, o, "dxg", "open-rw /dev/dxg: ok")
			if !strings.Contains(o.hookLog, tt.wantLog) {
				t.Errorf("hook log lacks %q:\n%s", tt.wantLog, o.hookLog)
			}
		})
	}
}
