package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/fixture"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/simhost"
)

// doctorResult is one line of `doctor --json` (pkg/setup/doctor.Result).
type doctorResult struct {
	Check  string `json:"check"`
	Status string `json:"status"`
	Detail string `json:"detail"`
	Fix    string `json:"fix"`
}

// TestDoctor runs `wsl-gpu-hook doctor --json` on the simulated laptop
// (dxgsim --bind-host: the fixture at /usr/lib/wsl, the node at /dev/dxg)
// with each fault the hook's fault suite injects, plus CDI specs, and
// checks the right check fails with the right fix and the exit status
// says so. Engine configuration is read from an empty root, so the
// machine's own Docker or podman setup cannot change the verdict.
func TestDoctor(t *testing.T) {
	h := env(t)
	hookBin := need(t, "build wsl-gpu-hook", h.hook)
	sim := need(t, "build dxgsim", h.dxgsim)
	nv := folder(t, "nvidia-laptop", simhost.FolderNVIDIA)
	intel := folder(t, "nvidia-laptop", simhost.FolderIntel)

	lib, drivers := "usr/lib/wsl/lib", "usr/lib/wsl/drivers"
	const oldFolder = "nvltwi.inf_amd64_00c0ffee00c0ffee"
	type want struct{ check, status, detail, fix string }
	tests := []struct {
		name      string
		profile   string // default nvidia-laptop
		faults    []string
		devMode   string // chmod /dev/dxg to this inside the simulated host
		breakHost func(t *testing.T, host string)
		specs     map[string]string // CDI specs under the engine root
		fail      bool              // exit status 1
		want      []want
	}{
		{name: "healthy laptop", want: []want{
			{"dxg", "ok", "/dev/dxg: character device 10:229, mode 0666, opens read-write as root", ""},
			{"kernel", "ok", "LX_DXENUMADAPTERS3", ""},
			{"adapter 0", "ok", "Intel(R) Iris(R) Xe Graphics (intel, LUID 0x1a1d77, WDDM 3.0): folder /usr/lib/wsl/drivers/" + intel.Folder, ""},
			{"adapter 1", "ok", "NVIDIA GeForce RTX 3060 Laptop GPU (nvidia, LUID 0x4486d1, WDDM 3.0): folder /usr/lib/wsl/drivers/" + nv.Folder, ""},
			{"lib dir", "ok", "libcuda.so.1, libnvidia-ml.so.1, nvidia-smi", ""},
			// This machine's /sys has no dxgkrnl: starts open /dev/dxg.
			{"warm start", "warn", "cannot list the GPU driver's devices in sysfs", ""},
		}},
		{name: "registry spells the NPU folder in capitals", profile: "intel-npu", want: []want{
			{"adapter 1", "ok", "Intel(R) AI Boost (intel, LUID 0x13f71, WDDM 3.1): folder /usr/lib/wsl/drivers/kipudrv.inf_amd64_5d9e7c7a1b3f2e08 (the registry spells it KIPUDRV.INF_AMD64_5D9E7C7A1B3F2E08; matched ignoring case, as Windows does)", ""},
			{"kernel", "ok", "compute-only adapters included", ""},
		}},
		{name: "current NVIDIA spec", specs: map[string]string{"etc/cdi/nvidia.yaml": fixture.NVIDIASpec(nv.Folder)}, want: []want{
			{"cdi /etc/cdi/nvidia.yaml", "ok", "nvidia.com/gpu: nvidia.com/gpu=all; every path it names exists", ""},
		}},
		{name: "stale NVIDIA spec", specs: map[string]string{"etc/cdi/nvidia.yaml": fixture.NVIDIASpec(oldFolder)}, fail: true, want: []want{
			{"cdi /etc/cdi/nvidia.yaml", "fail", "/usr/lib/wsl/drivers/" + oldFolder + `/libcuda.so.1.1, /usr/lib/wsl/drivers/` + oldFolder + `/nvidia-smi no longer exist on the host: the spec names a driver store folder by its hash, and a Windows driver update replaced that folder; containers given these devices fail to start or print "Failed to initialize NVML: N/A"`,
				"sudo nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml, or use ours, which follows driver updates: sudo rm /etc/cdi/nvidia.yaml && sudo wsl-gpu-hook install cdi"},
			{"adapter 1", "ok", nv.Folder, ""},
		}},
		{name: "old kernel", faults: []string{"old-kernel"}, want: []want{
			{"kernel", "warn", "lacks LX_DXENUMADAPTERS3 and answered LX_DXENUMADAPTERS2", "in Windows: wsl --update, then wsl --shutdown"},
			{"adapter 1", "ok", nv.Folder, ""},
		}},
		{name: "NVIDIA query fails", faults: []string{"query-fail=1"}, fail: true, want: []want{
			{"adapter 1", "fail", "LUID 0x4486d1 did not answer its queries", "in Windows: install or update the GPU driver, then wsl --shutdown"},
			{"adapter 0", "ok", intel.Folder, ""},
		}},
		{name: "query fails as raw NTSTATUS", faults: []string{"query-fail=0", "ntstatus"}, fail: true, want: []want{
			{"adapter 0", "fail", "STATUS_DEVICE_REMOVED", "in Windows: install or update the GPU driver, then wsl --shutdown"},
		}},
		{name: "NVIDIA folder gone", faults: []string{"missing-folder=1"}, fail: true, want: []want{
			{"adapter 1", "fail", "was not found under /usr/lib/wsl/drivers: the Windows driver was probably updated while WSL was running", "in Windows: wsl --shutdown"},
		}},
		{name: "zero adapters", faults: []string{"zero-adapters"}, fail: true, want: []want{
			{"adapters", "fail", "no GPU adapters: the Windows host exposes none to WSL", "in Windows: install or update the GPU driver, then wsl --shutdown"},
		}},
		{name: "device denied", faults: []string{"denied"}, fail: true, want: []want{
			{"dxg", "fail", "/dev/dxg (character device 10:229, mode 0600) does not open read-write as uid 65534: open /dev/dxg: permission denied", "sudo chmod 0666 /dev/dxg"},
		}},
		{name: "device root only", devMode: "0600", fail: true, want: []want{
			{"dxg", "fail", "/dev/dxg (character device 10:229) is mode 0600: other users may not read and write it", "sudo chmod 0666 /dev/dxg"},
			{"adapter 1", "ok", nv.Folder, ""},
		}},
		{name: "lib dir missing", breakHost: replace(lib, gone), fail: true, want: []want{
			{"lib dir", "fail", "/usr/lib/wsl/lib does not exist", "in Windows: install or update the GPU driver, then wsl --shutdown"},
			{"adapter 1", "ok", nv.Folder, ""},
		}},
		{name: "lib dir is a file", breakHost: replace(lib, asFile), fail: true, want: []want{
			{"lib dir", "fail", "/usr/lib/wsl/lib is not a directory", ""},
		}},
		{name: "lib dir root only", breakHost: rootOnly(lib), fail: true, want: []want{
			{"lib dir", "fail", "/usr/lib/wsl/lib is mode 0700", "sudo chmod a+rx /usr/lib/wsl/lib"},
		}},
		{name: "drivers dir missing", breakHost: replace(drivers, gone), fail: true, want: []want{
			{"adapter 0", "fail", "the drivers dir /usr/lib/wsl/drivers does not exist", "in Windows: wsl --shutdown"},
			{"adapter 1", "fail", "the drivers dir /usr/lib/wsl/drivers does not exist", "in Windows: wsl --shutdown"},
		}},
		{name: "NVIDIA folder is a file", breakHost: replace(drivers+"/"+nv.Folder, asFile), fail: true, want: []want{
			{"adapter 1", "fail", "is not a directory: refusing it", ""},
		}},
		{name: "NVIDIA folder is a link to /", breakHost: replace(drivers+"/"+nv.Folder, toRoot), fail: true, want: []want{
			{"adapter 1", "fail", "is a symlink: refusing it", ""},
		}},
		{name: "NVIDIA folder root only", breakHost: rootOnly(drivers + "/" + nv.Folder), fail: true, want: []want{
			{"adapter 1", "fail", "is not readable by everyone (mode 0700)", "sudo chmod a+rx /usr/lib/wsl/drivers/" + nv.Folder},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// Everything the doctor reads is readable by uid 65534, which
			// the denied fault runs it as.
			dir, err := os.MkdirTemp("", "wsl-gpu-hook-doctor-")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(dir) })
			if err := os.Chmod(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			// doctor is wsl-gpu-ctl's, run through the hook as users may.
			bin := filepath.Join(dir, "wsl-gpu-hook")
			for _, name := range []string{"wsl-gpu-hook", "wsl-gpu-ctl"} {
				if err := copyFile(filepath.Join(filepath.Dir(hookBin), name), filepath.Join(dir, name), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			root := filepath.Join(dir, "root")
			for p, content := range tt.specs {
				if err := os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(root, p), []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.MkdirAll(root, 0o755); err != nil {
				t.Fatal(err)
			}
			cfg := filepath.Join(dir, "config.toml")
			if err := os.WriteFile(cfg, []byte(fmt.Sprintf("log_file = %q\n", filepath.Join(dir, "hook.log"))), 0o644); err != nil {
				t.Fatal(err)
			}
			profile := tt.profile
			if profile == "" {
				profile = "nvidia-laptop"
			}
			host := h.needFixture(t, profile)
			if tt.breakHost != nil {
				host = brokenCopy(t, host, filepath.Join(dir, "host"), tt.breakHost)
			}
			argv := []string{sim, "--profile", profile, "--bind-host", host}
			for _, f := range tt.faults {
				argv = append(argv, "--fault", f)
			}
			argv = append(argv, "--")
			if tt.devMode != "" {
				argv = append(argv, "sh", "-c", `chmod "$0" /dev/dxg && exec "$@"`, tt.devMode)
			}
			argv = append(argv, bin, "--config", cfg, "doctor", "--json", "--root", root)
			code, stdout, stderr := execute(t, argv)
			var rep struct {
				Results []doctorResult `json:"results"`
			}
			if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
				t.Fatalf("doctor --json: %v (exit %d)\nstdout:\n%s\nstderr:\n%s", err, code, stdout, stderr)
			}
			var text strings.Builder
			for _, r := range rep.Results {
				fmt.Fprintf(&text, "%-4s  %s: %s  -> fix: %s\n", r.Status, r.Check, r.Detail, r.Fix)
			}
			wantCode := 0
			if tt.fail {
				wantCode = 1
			}
			if code != wantCode {
				t.Errorf("exit status %d, want %d\n%s%s", code, wantCode, text.String(), stderr)
			}
			for _, w := range tt.want {
				var got *doctorResult
				for i := range rep.Results {
					if rep.Results[i].Check == w.check {
						got = &rep.Results[i]
					}
				}
				if got == nil || got.Status != w.status || !strings.Contains(got.Detail, w.detail) || got.Fix != w.fix {
					t.Errorf("want %s: %s containing %q, fix %q; doctor said:\n%s", w.check, w.status, w.detail, w.fix, text.String())
				}
			}
			if !tt.fail {
				for _, r := range rep.Results {
					if r.Status == "fail" {
						t.Errorf("unexpected failure: %s: %s", r.Check, r.Detail)
					}
				}
			}
		})
	}
}
