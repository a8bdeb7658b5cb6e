package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/simhost"
)

// Each vendor's stack beyond the driver folders, from inside the container,
// through the paths that can set a container's environment (CDI devices
// injected as engines do, the wsl-gpu-runtime wrapper) and through the
// prestart hook, which cannot and says so in its log.

// via is one way a container asks: through CDI device names, through the
// wrapper with request and capability variables, or through the prestart
// hook with the same variables.
type via struct {
	name string
	box  func(profile string) box
}

func viaCDI(devices ...string) via {
	return via{"cdi", func(profile string) box {
		return box{image: imageDebian, sim: &simulation{profile: profile}, cdi: devices}
	}}
}

func viaWrapper(env ...string) via {
	return via{"wrapper", func(profile string) box {
		return box{image: imageDebian, sim: &simulation{profile: profile}, wrapper: true, env: env}
	}}
}

func viaHook(env ...string) via {
	return via{"prestart", func(profile string) box {
		return box{image: imageDebian, sim: &simulation{profile: profile}, hook: hookConfig, env: env}
	}}
}

// envOf parses the output of the "env" check.
func envOf(t *testing.T, o *outcome) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, l := range strings.Split(o.succeeds(t, "env"), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			m[k] = v
		}
	}
	return m
}

// wantEnv checks variables: a value, or "" for unset.
func wantEnv(t *testing.T, env map[string]string, want map[string]string) {
	t.Helper()
	for k, w := range want {
		got, ok := env[k]
		switch {
		case w == "" && ok:
			t.Errorf("%s=%q is set, want it unset", k, got)
		case w != "" && got != w:
			t.Errorf("%s=%q, want %q", k, got, w)
		}
	}
}

func runVia(t *testing.T, profile string, v via, checks ...check) *outcome {
	t.Helper()
	b := v.box(profile)
	b.checks = append([]check{{"env", "env"}}, checks...)
	o := runBox(t, b)
	o.started(t)
	return o
}

// TestAMDROCm: an AMD container gets librocdxg where ROCm's HSA runtime
// looks for it, dids.conf next to it, and HSA_ENABLE_DXG_DETECTION=1; a
// program doing what the runtime does loads it and opens the GPU.
func TestAMDROCm(t *testing.T) {
	env(t)
	t.Parallel()
	const profile = "amd-desktop"
	checks := []check{
		{"rocprobe", "rocprobe"},
		exists("hsa", "/usr/lib/libhsa-runtime64.so.1"),
		exists("opt-rocm", "/opt/rocm"),
	}
	for _, v := range []via{viaCDI("amd.com/gpu=all"), viaCDI("wsl-gpu-hook.dev/gpu=0"), viaWrapper("WSL_GPU_DEVICES=amd")} {
		t.Run(v.name+" "+strings.Join(append(v.box(profile).cdi, v.box(profile).env...), " "), func(t *testing.T) {
			t.Parallel()
			o := runVia(t, profile, v, checks...)
			wantEnv(t, envOf(t, o), map[string]string{"HSA_ENABLE_DXG_DETECTION": "1"})
			out := o.succeeds(t, "rocprobe")
			for _, w := range []string{"loaded librocdxg.so.1 from /usr/lib/librocdxg.so.1", "dids.conf: 0x744C,11,0,0", "hsaKmtOpenKFD() = 0"} {
				if !strings.Contains(out, w) {
					t.Errorf("rocprobe lacks %q:\n%s", w, out)
				}
			}
			// Only librocdxg: the rest of the host's ROCm stays there.
			wantOutput(t, o, "hsa", "absent")
			wantOutput(t, o, "opt-rocm", "absent")
		})
	}
	t.Run("prestart", func(t *testing.T) {
		t.Parallel()
		// The hook mounts librocdxg but cannot set the variable: the log
		// says to, and with it set by the user ROCm loads.
		o := runVia(t, profile, viaHook("WSL_GPU_DEVICES=amd"), check{"rocprobe", "rocprobe"},
			check{"rocprobe-env", "HSA_ENABLE_DXG_DETECTION=1 rocprobe"})
		if r := o.result(t, "rocprobe"); r.code != 2 {
			t.Errorf("rocprobe without the variable: exit %d, want 2:\n%s", r.code, r.out)
		}
		if out := o.succeeds(t, "rocprobe-env"); !strings.Contains(out, "hsaKmtOpenKFD() = 0") {
			t.Errorf("rocprobe with the variable:\n%s", out)
		}
		if !strings.Contains(o.hookLog, "HSA_ENABLE_DXG_DETECTION=1") {
			t.Errorf("the hook log does not name HSA_ENABLE_DXG_DETECTION=1:\n%s", o.hookLog)
		}
	})
	t.Run("no librocdxg on the host", func(t *testing.T) {
		t.Parallel()
		b := viaWrapper("WSL_GPU_DEVICES=amd").box(profile)
		b.sim.breakHost = func(t *testing.T, host string) { removeAll(t, host, "opt") }
		b.checks = []check{{"env", "env"}, exists("rocdxg", "/usr/lib/librocdxg.so.1")}
		o := runBox(t, b)
		o.started(t)
		wantOutput(t, o, "rocdxg", "absent")
		wantEnv(t, envOf(t, o), map[string]string{"HSA_ENABLE_DXG_DETECTION": ""})
		if !strings.Contains(o.hookLog, "no librocdxg at") || !strings.Contains(o.hookLog, "install ROCm 7.1+") {
			t.Errorf("the log does not say librocdxg is missing:\n%s", o.hookLog)
		}
	})
	t.Run("nvidia container gets no ROCm", func(t *testing.T) {
		t.Parallel()
		o := runVia(t, "nvidia-laptop", viaWrapper("WSL_GPU_DEVICES=all"), exists("rocdxg", "/usr/lib/librocdxg.so.1"))
		wantOutput(t, o, "rocdxg", "absent")
		wantEnv(t, envOf(t, o), map[string]string{"HSA_ENABLE_DXG_DETECTION": ""})
	})
}

// TestVideo: video gives /dev/dri nodes that open and the VA-API variable;
// nothing of it appears without the capability.
func TestVideo(t *testing.T) {
	env(t)
	t.Parallel()
	const profile = "nvidia-laptop"
	checks := []check{
		{"card0", "fsprobe open-rw /dev/dri/card0"},
		{"render", "fsprobe open-rw /dev/dri/renderD128"},
		exists("dri", "/dev/dri"),
	}
	tests := []struct {
		v     via
		video bool
		// setsEnv: the path can set variables (not a prestart hook).
		setsEnv bool
	}{
		{viaCDI("wsl-gpu-hook.dev/gpu=all", "wsl-gpu-hook.dev/gpu=video"), true, true},
		{viaWrapper("WSL_GPU_DEVICES=all", "WSL_GPU_CAPABILITIES=video"), true, true},
		{viaWrapper("NVIDIA_VISIBLE_DEVICES=all", "NVIDIA_DRIVER_CAPABILITIES=compute,utility,video"), true, true},
		{viaHook("NVIDIA_VISIBLE_DEVICES=all", "NVIDIA_DRIVER_CAPABILITIES=compute,utility,video"), true, false},
		{viaCDI("wsl-gpu-hook.dev/gpu=all"), false, true},
		{viaWrapper("WSL_GPU_DEVICES=all"), false, true},
		{viaHook("NVIDIA_VISIBLE_DEVICES=all", "NVIDIA_DRIVER_CAPABILITIES=compute,utility"), false, false},
	}
	for _, tt := range tests {
		name := tt.v.name + " " + strings.Join(append(tt.v.box(profile).cdi, tt.v.box(profile).env...), " ")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			o := runVia(t, profile, tt.v, checks...)
			env := envOf(t, o)
			if !tt.video {
				wantOutput(t, o, "dri", "absent")
				wantEnv(t, env, map[string]string{"LIBVA_DRIVER_NAME": ""})
				return
			}
			wantOutput(t, o, "card0", "open-rw /dev/dri/card0: ok")
			wantOutput(t, o, "render", "open-rw /dev/dri/renderD128: ok")
			if tt.setsEnv {
				wantEnv(t, env, map[string]string{"LIBVA_DRIVER_NAME": "d3d12"})
			} else {
				wantEnv(t, env, map[string]string{"LIBVA_DRIVER_NAME": ""})
				if !strings.Contains(o.hookLog, "LIBVA_DRIVER_NAME=d3d12") {
					t.Errorf("the hook log does not name LIBVA_DRIVER_NAME=d3d12:\n%s", o.hookLog)
				}
			}
		})
	}
}

// TestDisplay: display gives WSLg's sockets and the variables that point
// at them, and only when named: "all" does not include it.
func TestDisplay(t *testing.T) {
	env(t)
	t.Parallel()
	const profile = "nvidia-laptop"
	checks := []check{
		{"x11", "test -S /tmp/.X11-unix/X0 && echo socket"},
		{"wayland", `test -S "$XDG_RUNTIME_DIR/wayland-0" && echo socket`},
		{"pulse", "test -S /mnt/wslg/PulseServer && echo socket"},
		{"wslg", "ls -A /mnt/wslg"},
		exists("x11dir", "/tmp/.X11-unix"),
	}
	display := map[string]string{"DISPLAY": ":0", "WAYLAND_DISPLAY": "wayland-0", "XDG_RUNTIME_DIR": "/mnt/wslg/runtime-dir", "PULSE_SERVER": "unix:/mnt/wslg/PulseServer"}
	none := map[string]string{"DISPLAY": "", "WAYLAND_DISPLAY": "", "XDG_RUNTIME_DIR": "", "PULSE_SERVER": ""}
	tests := []struct {
		v       via
		display bool
	}{
		{viaCDI("wsl-gpu-hook.dev/gpu=all", "wsl-gpu-hook.dev/gpu=display"), true},
		{viaWrapper("WSL_GPU_DEVICES=all", "WSL_GPU_CAPABILITIES=display"), true},
		{viaWrapper("NVIDIA_VISIBLE_DEVICES=all", "NVIDIA_DRIVER_CAPABILITIES=all"), false},
		{viaCDI("wsl-gpu-hook.dev/gpu=all"), false},
	}
	for _, tt := range tests {
		name := tt.v.name + " " + strings.Join(append(tt.v.box(profile).cdi, tt.v.box(profile).env...), " ")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			o := runVia(t, profile, tt.v, checks...)
			env := envOf(t, o)
			if !tt.display {
				wantOutput(t, o, "x11dir", "absent")
				wantEnv(t, env, none)
				return
			}
			for _, c := range []string{"x11", "wayland", "pulse"} {
				wantOutput(t, o, c, "socket")
			}
			// WSLg's own files (and its system distro) stay on the host.
			wantOutput(t, o, "wslg", "PulseServer\nruntime-dir")
			wantEnv(t, env, display)
		})
	}
	t.Run("the user's DISPLAY wins", func(t *testing.T) {
		t.Parallel()
		o := runVia(t, profile, viaWrapper("WSL_GPU_DEVICES=all", "WSL_GPU_CAPABILITIES=display", "DISPLAY=:7"))
		wantEnv(t, envOf(t, o), map[string]string{"DISPLAY": ":7", "WAYLAND_DISPLAY": "wayland-0"})
	})
}

// TestIntelAffinity: selecting one of two Intel GPUs sets ZE_AFFINITY_MASK
// to its index among the Intel GPUs; selecting all sets nothing.
func TestIntelAffinity(t *testing.T) {
	env(t)
	t.Parallel()
	const profile = "intel-arc-desktop"
	arc := "Intel(R) Arc(TM) A770 Graphics"
	tests := []struct {
		v    via
		want map[string]string
	}{
		{viaCDI("wsl-gpu-hook.dev/gpu=1"), map[string]string{"ZE_AFFINITY_MASK": "1", "MESA_D3D12_DEFAULT_ADAPTER_NAME": arc}},
		{viaWrapper("WSL_GPU_DEVICES=1"), map[string]string{"ZE_AFFINITY_MASK": "1", "MESA_D3D12_DEFAULT_ADAPTER_NAME": ""}},
		{viaWrapper("WSL_GPU_DEVICES=0"), map[string]string{"ZE_AFFINITY_MASK": "0"}},
		{viaWrapper("WSL_GPU_DEVICES=1", "WSL_GPU_CAPABILITIES=graphics"), map[string]string{"ZE_AFFINITY_MASK": "1", "MESA_D3D12_DEFAULT_ADAPTER_NAME": arc}},
		{viaWrapper("WSL_GPU_DEVICES=1", "ZE_AFFINITY_MASK=0"), map[string]string{"ZE_AFFINITY_MASK": "0"}},
		{viaWrapper("WSL_GPU_DEVICES=all", "WSL_GPU_CAPABILITIES=graphics"), map[string]string{"ZE_AFFINITY_MASK": "", "MESA_D3D12_DEFAULT_ADAPTER_NAME": ""}},
		{viaCDI("wsl-gpu-hook.dev/gpu=intel"), map[string]string{"ZE_AFFINITY_MASK": "", "MESA_D3D12_DEFAULT_ADAPTER_NAME": ""}},
	}
	for _, tt := range tests {
		name := tt.v.name + " " + strings.Join(append(tt.v.box(profile).cdi, tt.v.box(profile).env...), " ")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			o := runVia(t, profile, tt.v)
			wantEnv(t, envOf(t, o), tt.want)
		})
	}
}

// TestQualcomm: a Windows on Arm host (Snapdragon X: Adreno GPU, Hexagon
// NPU, arm64 driver store folders, vendor "QCOM"). A container asking for
// Qualcomm's adapters by any path opens /dev/dxg, finds libdxcore and
// libd3d12 through its loader cache as Mesa does, and gets exactly the
// selected adapters' folders, read-only; Mesa is pointed at the Adreno,
// never at the NPU, and only where there is a choice to make. The fixture's
// libraries are the test machine's architecture, so this runs on x86_64;
// the arm64 build's decisions are the same code (make test-arm64).
func TestQualcomm(t *testing.T) {
	env(t)
	t.Parallel()
	const profile = "snapdragon-x"
	gpu, npu := folder(t, profile, simhost.FolderQualcomm), folder(t, profile, simhost.FolderHexagon)
	both := strings.Join(sorted(gpu.Folder, npu.Folder), "\n")
	checks := []check{
		{"dxg", "fsprobe open-rw /dev/dxg"},
		{"drivers", "ls /usr/lib/wsl/drivers"},
		{"d3d12probe", "d3d12probe"},
		{"write-driver", "fsprobe create /usr/lib/wsl/drivers/" + gpu.Folder + "/e2e-write-test"},
		exists("cuda", "/usr/lib/wsl/lib/libcuda.so.1"),
	}
	tests := []struct {
		v       via
		folders string
		mesa    string // MESA_D3D12_DEFAULT_ADAPTER_NAME, "" unset
	}{
		// The vendor's device: the GPU and the NPU, nothing to choose
		// between (one renderer), so no variable.
		{viaCDI("wsl-gpu-hook.dev/gpu=qualcomm"), both, ""},
		{viaCDI("wsl-gpu-hook.dev/gpu=0"), gpu.Folder, ""},
		{viaCDI("wsl-gpu-hook.dev/gpu=all"), both, ""},
		{viaWrapper("WSL_GPU_DEVICES=qualcomm", "WSL_GPU_CAPABILITIES=graphics"), both, gpu.Description},
		{viaWrapper("WSL_GPU_DEVICES=1", "WSL_GPU_CAPABILITIES=graphics"), npu.Folder, ""},
		{viaHook("WSL_GPU_DEVICES=qualcomm"), both, ""},
	}
	for _, tt := range tests {
		name := tt.v.name + " " + strings.Join(append(tt.v.box(profile).cdi, tt.v.box(profile).env...), " ")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			o := runVia(t, profile, tt.v, checks...)
			wantOutput(t, o, "dxg", "open-rw /dev/dxg: ok")
			wantOutput(t, o, "drivers", tt.folders)
			// An arm64 host has no NVIDIA files: nothing of CUDA appears.
			wantOutput(t, o, "cuda", "absent")
			d3d12 := o.succeeds(t, "d3d12probe")
			for _, w := range []string{"loaded /usr/lib/wsl/lib/libdxcore.so", "DXCoreCreateAdapterFactory found", "loaded /usr/lib/wsl/lib/libd3d12.so", "D3D12CreateDevice found"} {
				if !strings.Contains(d3d12, w) {
					t.Errorf("d3d12probe lacks %q:\n%s", w, d3d12)
				}
			}
			if tt.folders != npu.Folder {
				if got := o.result(t, "write-driver").out; !strings.Contains(got, ": EROFS ") {
					t.Errorf("writing into the Adreno's folder: %q, want EROFS", got)
				}
			}
			wantEnv(t, envOf(t, o), map[string]string{"MESA_D3D12_DEFAULT_ADAPTER_NAME": tt.mesa, "ZE_AFFINITY_MASK": "", "HSA_ENABLE_DXG_DETECTION": ""})
		})
	}
}

// removeAll deletes rel under a copy of the fixture (a host without it).
func removeAll(t *testing.T, host, rel string) {
	t.Helper()
	if err := os.RemoveAll(filepath.Join(host, rel)); err != nil {
		t.Fatal(err)
	}
}
