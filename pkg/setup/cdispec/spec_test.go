package cdispec

import (
	"errors"
	"reflect"
	"sort"
	"strings"
	"testing"

	oci "github.com/opencontainers/runtime-spec/specs-go"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"
	cdi "tags.cncf.io/container-device-interface/specs-go"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/devnode"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/driverstore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/dxcore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/cdiselect"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/fixture"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/simhost"
)

func adapter(index int, v driverstore.Vendor, luid uint32, folder string) driverstore.Adapter {
	return driverstore.Adapter{Adapter: dxcore.Adapter{Index: index, LUID: dxcore.LUID{Low: luid}}, Vendor: v, Folder: folder}
}

// laptop is the simulated NVIDIA laptop: Intel iGPU first, NVIDIA second.
func laptop() *driverstore.Inventory {
	return &driverstore.Inventory{Adapters: []driverstore.Adapter{
		adapter(0, driverstore.Intel, 0x1a1d77, "iigd_dch.inf_amd64_ba2ab4a3e0e0b2ea"),
		adapter(1, driverstore.NVIDIA, 0x4486d1, "nvltwi.inf_amd64_7b2a5c1c4e6f8d90"),
	}}
}

var opts = Options{
	Device:   devnode.Node{Path: "/dev/dxg", Major: 10, Minor: 53},
	LibDir:   "/usr/lib/wsl/lib",
	HookPath: "/usr/local/bin/wsl-gpu-hook",
	HookArgs: []string{"wsl-gpu-hook"},
}

func devices(s *cdi.Spec) map[string]string {
	out := map[string]string{}
	for _, d := range s.Devices {
		out[d.Name] = strings.Join(d.ContainerEdits.Env, " ")
	}
	return out
}

func TestGenerateNames(t *testing.T) {
	tests := []struct {
		name string
		inv  *driverstore.Inventory
		skip []string
		want map[string]map[string]string // kind -> device -> env
	}{
		{name: "NVIDIA laptop", inv: laptop(), want: map[string]map[string]string{
			Kind: {
				"all":      "WSL_GPU_CDI_WSL_GPU_HOOK_DEV_GPU_ALL=all",
				"intel":    "WSL_GPU_CDI_WSL_GPU_HOOK_DEV_GPU_INTEL=vendor:intel",
				"nvidia":   "WSL_GPU_CDI_WSL_GPU_HOOK_DEV_GPU_NVIDIA=vendor:nvidia",
				"0":        "WSL_GPU_CDI_WSL_GPU_HOOK_DEV_GPU_0=index:0",
				"1":        "WSL_GPU_CDI_WSL_GPU_HOOK_DEV_GPU_1=index:1",
				"0x1a1d77": "WSL_GPU_CDI_WSL_GPU_HOOK_DEV_GPU_0X1A1D77=luid:0x1a1d77",
				"0x4486d1": "WSL_GPU_CDI_WSL_GPU_HOOK_DEV_GPU_0X4486D1=luid:0x4486d1",
			},
			// NVIDIA numbers its own GPUs: the laptop's NVIDIA adapter is
			// index 1 on the host but 0 to --gpus 1 and device=0.
			NVIDIAKind: {
				"all": "WSL_GPU_CDI_NVIDIA_COM_GPU_ALL=vendor:nvidia",
				"0":   "WSL_GPU_CDI_NVIDIA_COM_GPU_0=vendor:nvidia:0",
			},
		}},
		{name: "NVIDIA kind skipped", inv: laptop(), skip: []string{NVIDIAKind}, want: map[string]map[string]string{
			Kind: {
				"all": "WSL_GPU_CDI_WSL_GPU_HOOK_DEV_GPU_ALL=all", "intel": "WSL_GPU_CDI_WSL_GPU_HOOK_DEV_GPU_INTEL=vendor:intel",
				"nvidia": "WSL_GPU_CDI_WSL_GPU_HOOK_DEV_GPU_NVIDIA=vendor:nvidia",
				"0":      "WSL_GPU_CDI_WSL_GPU_HOOK_DEV_GPU_0=index:0", "1": "WSL_GPU_CDI_WSL_GPU_HOOK_DEV_GPU_1=index:1",
				"0x1a1d77": "WSL_GPU_CDI_WSL_GPU_HOOK_DEV_GPU_0X1A1D77=luid:0x1a1d77", "0x4486d1": "WSL_GPU_CDI_WSL_GPU_HOOK_DEV_GPU_0X4486D1=luid:0x4486d1",
			},
		}},
		// Windows on Arm: no engine maps --gpus to a Qualcomm kind and
		// Qualcomm publishes none, so the Adreno and the Hexagon NPU are
		// devices of the project's own kind only: qualcomm is both.
		{name: "Snapdragon", inv: &driverstore.Inventory{Adapters: []driverstore.Adapter{
			adapter(0, driverstore.Qualcomm, 0xe3b5, "qcdxkmsuc8380.inf_arm64_9a0f6b4e21c3d857"),
			adapter(1, driverstore.Qualcomm, 0xe47a, "qcnspmcdm8380.inf_arm64_4e7d2c19b0a85f36"),
		}}, want: map[string]map[string]string{
			Kind: {
				"all": "WSL_GPU_CDI_WSL_GPU_HOOK_DEV_GPU_ALL=all", "qualcomm": "WSL_GPU_CDI_WSL_GPU_HOOK_DEV_GPU_QUALCOMM=vendor:qualcomm",
				"0": "WSL_GPU_CDI_WSL_GPU_HOOK_DEV_GPU_0=index:0", "1": "WSL_GPU_CDI_WSL_GPU_HOOK_DEV_GPU_1=index:1",
				"0xe3b5": "WSL_GPU_CDI_WSL_GPU_HOOK_DEV_GPU_0XE3B5=luid:0xe3b5", "0xe47a": "WSL_GPU_CDI_WSL_GPU_HOOK_DEV_GPU_0XE47A=luid:0xe47a",
			},
		}},
		{name: "two AMD GPUs, the first without a folder", inv: &driverstore.Inventory{Adapters: []driverstore.Adapter{
			{Adapter: dxcore.Adapter{Index: 0, LUID: dxcore.LUID{Low: 0x10b3c}}, Vendor: driverstore.AMD, Err: errors.New("folder missing")},
			adapter(1, driverstore.AMD, 0x10b99, "u0398975.inf_amd64_cab3843582148687"),
		}}, want: map[string]map[string]string{
			Kind: {
				"all": "WSL_GPU_CDI_WSL_GPU_HOOK_DEV_GPU_ALL=all", "amd": "WSL_GPU_CDI_WSL_GPU_HOOK_DEV_GPU_AMD=vendor:amd",
				"0": "WSL_GPU_CDI_WSL_GPU_HOOK_DEV_GPU_0=index:0", "1": "WSL_GPU_CDI_WSL_GPU_HOOK_DEV_GPU_1=index:1",
				"0x10b3c": "WSL_GPU_CDI_WSL_GPU_HOOK_DEV_GPU_0X10B3C=luid:0x10b3c", "0x10b99": "WSL_GPU_CDI_WSL_GPU_HOOK_DEV_GPU_0X10B99=luid:0x10b99",
			},
			AMDKind: {
				"all": "WSL_GPU_CDI_AMD_COM_GPU_ALL=vendor:amd",
				"0":   "WSL_GPU_CDI_AMD_COM_GPU_0=vendor:amd:0", "1": "WSL_GPU_CDI_AMD_COM_GPU_1=vendor:amd:1",
			},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := opts
			o.SkipKinds = tt.skip
			specs, err := Generate(tt.inv, o)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]map[string]string{}
			for _, s := range specs {
				got[s.Kind] = devices(s)
				if s.Version != "0.5.0" {
					t.Errorf("%s: cdiVersion %s, want 0.5.0 (the oldest with deviceNodes hostPath; podman 4.3 reads up to 0.5.0)", s.Kind, s.Version)
				}
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("devices:\n got %v\nwant %v", got, tt.want)
			}
		})
	}
}

// TestGenerateNamesNoFolder: the spec must not go stale, so nothing a
// driver update changes may appear in it.
func TestGenerateNamesNoFolder(t *testing.T) {
	inv := laptop()
	specs, err := Generate(inv, opts)
	if err != nil {
		t.Fatal(err)
	}
	// The same host after a driver update: new folder names.
	updated := laptop()
	updated.Adapters[1].Folder = "nvltwi.inf_amd64_0000000000000000"
	again, err := Generate(updated, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range specs {
		data, err := Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range inv.Adapters {
			if strings.Contains(string(data), a.Folder) || strings.Contains(string(data), "drivers") {
				t.Errorf("%s names driver store folder %s:\n%s", s.Kind, a.Folder, data)
			}
		}
		data2, _ := Marshal(again[i])
		if string(data) != string(data2) {
			t.Errorf("%s changed with a driver update", s.Kind)
		}
	}
}

func TestGenerateNoAdapter(t *testing.T) {
	if _, err := Generate(&driverstore.Inventory{}, opts); err == nil {
		t.Fatal("Generate without adapters succeeded")
	}
}

// TestEngineInjects loads the specs as engines do (the CDI library's cache
// over a spec dir), injects devices into an OCI spec and decodes what the
// hook will read: the selections of exactly the devices asked for.
func TestEngineInjects(t *testing.T) {
	// The spec leaves the numbers to the engine's stat of the host path:
	// a character device every machine has stands in for /dev/dxg.
	dir := writeSpecs(t, laptop(), opts)
	cache, err := cdiapi.NewCache(cdiapi.WithSpecDirs(dir), cdiapi.WithAutoRefresh(false))
	if err != nil {
		t.Fatalf("engines would reject the specs: %v", err)
	}
	tests := []struct {
		devices []string
		want    []string
	}{
		{[]string{"nvidia.com/gpu=all"}, []string{"vendor:nvidia"}},
		{[]string{"nvidia.com/gpu=0"}, []string{"vendor:nvidia:0"}},
		{[]string{"wsl-gpu-hook.dev/gpu=intel"}, []string{"vendor:intel"}},
		{[]string{"wsl-gpu-hook.dev/gpu=0", "wsl-gpu-hook.dev/gpu=1"}, []string{"index:0", "index:1"}},
		// Two devices: each adds its own hook; the hook then runs twice,
		// and must not mount twice.
		{[]string{"nvidia.com/gpu=0", "wsl-gpu-hook.dev/gpu=intel"}, []string{"vendor:intel", "vendor:nvidia:0"}},
		{[]string{"nvidia.com/gpu=all", "nvidia.com/gpu=0"}, []string{"vendor:nvidia", "vendor:nvidia:0"}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.devices, "+"), func(t *testing.T) {
			spec := &oci.Spec{Process: &oci.Process{Env: []string{"PATH=/bin"}}}
			if unresolved, err := cache.InjectDevices(spec, tt.devices...); err != nil {
				t.Fatalf("inject %v: %v (unresolved %v)", tt.devices, err, unresolved)
			}
			// What each hook gets: its argument, never the container's
			// config (a hook in the container's user namespace cannot
			// read it), naming the same selection as the variable.
			var got []string
			for _, h := range spec.Hooks.CreateContainer {
				args, ok := strings.CutPrefix(strings.Join(h.Args, " "), strings.Join(opts.HookArgs, " ")+" "+HookCommand+" ")
				if h.Path != opts.HookPath || !ok {
					t.Fatalf("hook %+v is not `%s %s SELECTION`", h, opts.HookPath, HookCommand)
				}
				req, err := cdiselect.FromArgs(strings.Fields(args))
				if err != nil || len(req.Selections) != 1 {
					t.Fatalf("hook %+v: %+v, %v", h, req, err)
				}
				got = append(got, req.Selections[0].String())
			}
			sort.Strings(got)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("hooks' selections %v, want %v (hooks %+v)", got, tt.want, spec.Hooks.CreateContainer)
			}
			env, err := cdiselect.FromEnv(spec.Process.Env)
			if err != nil {
				t.Fatal(err)
			}
			var vars []string
			for _, s := range env.Selections {
				vars = append(vars, s.String())
			}
			sort.Strings(vars)
			if !reflect.DeepEqual(vars, tt.want) {
				t.Errorf("variables' selections %v, want %v (env %v)", vars, tt.want, spec.Process.Env)
			}
			if d := spec.Linux.Devices; len(d) != 1 || d[0].Path != "/dev/dxg" || d[0].Major != 1 || d[0].Minor != 3 {
				t.Errorf("devices %+v, want /dev/dxg once, numbered as the host node (1:3)", d)
			}
			if n := len(spec.Mounts); n != 1 {
				t.Errorf("%d mounts, want the lib dir once: %+v", n, spec.Mounts)
			}
		})
	}
}

func TestFileName(t *testing.T) {
	for kind, want := range map[string]string{
		Kind:       "wsl-gpu-hook.dev-gpu.json",
		NVIDIAKind: "nvidia.com-gpu_wsl-gpu-hook.json",
		AMDKind:    "amd.com-gpu_wsl-gpu-hook.json",
	} {
		if got := FileName(kind); got != want {
			t.Errorf("FileName(%s) = %s, want %s", kind, got, want)
		}
	}
}

// On a Ryzen AI host amd.com/gpu names the Radeon only: the XDNA NPU
// (AMD's own PCI id, compute-only) is no GPU, so neither amd.com/gpu=all
// nor an index there gives a container the NPU. Our own kind still
// names it, by index and LUID.
func TestRyzenAIVendorKindNamesOnlyTheGPU(t *testing.T) {
	p, err := simhost.Lookup("ryzen-ai")
	if err != nil {
		t.Fatal(err)
	}
	inv := &driverstore.Inventory{}
	for _, a := range fixture.Adapters(p) {
		inv.Adapters = append(inv.Adapters, driverstore.Adapter{Adapter: a, Vendor: driverstore.VendorOf(a.PCI.Vendor), Folder: "f"})
	}
	specs, err := Generate(inv, opts)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for _, s := range specs {
		if s.Kind != AMDKind {
			continue
		}
		for _, d := range s.Devices {
			u, err := cdiselect.FromArgs(d.ContainerEdits.Hooks[0].Args[len(d.ContainerEdits.Hooks[0].Args)-1:])
			if err != nil {
				t.Fatal(err)
			}
			picked, err := u.Select(inv.Adapters)
			if err != nil {
				t.Fatalf("%s: %v", d.Name, err)
			}
			for _, a := range picked {
				got[d.Name] = append(got[d.Name], a.Description)
			}
		}
	}
	want := map[string][]string{"all": {"AMD Radeon(TM) 890M Graphics"}, "0": {"AMD Radeon(TM) 890M Graphics"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("amd.com/gpu devices select %v, want %v", got, want)
	}
}
