package gpuplan

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/devnode"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/driverstore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/dxcore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/probed"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/ldcache"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/mounts"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/oci"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/request"
)

const (
	intelFolder  = "iigd_dch.inf_amd64_1"
	nvidiaFolder = "nv_dispi.inf_amd64_2"
)

var (
	errAMD = errors.New("adapter 2: driver store folder gone")
	errNV  = errors.New("adapter 1: driver store folder gone")
)

func adapter(i int, v driverstore.Vendor, folder string, err error) driverstore.Adapter {
	return driverstore.Adapter{Adapter: dxcore.Adapter{Index: i, LUID: dxcore.LUID{Low: uint32(0x100 + i)}}, Vendor: v, Folder: folder, Err: err}
}

// laptop is an Intel iGPU (0), an NVIDIA dGPU (1) and an AMD adapter whose
// folder is missing (2).
func laptop() probed.Host {
	return probed.Host{
		Node: devnode.Node{Path: "/host/dev/dxg", Major: 10, Minor: 63},
		Inventory: &driverstore.Inventory{
			LibDir: "/host/lib", DriversDir: "/host/drivers",
			Adapters: []driverstore.Adapter{
				adapter(0, driverstore.Intel, intelFolder, nil),
				adapter(1, driverstore.NVIDIA, nvidiaFolder, nil),
				adapter(2, driverstore.AMD, "", errAMD),
			},
		},
		NvidiaSmi: driverstore.NvidiaSmi{InLibDir: true},
		Ldcache:   []ldcache.Entry{{Key: "libcuda.so.1"}},
	}
}

func req(t *testing.T, env string) request.Selection {
	t.Helper()
	spec := &oci.Spec{Process: &oci.Process{Env: []string{env}}}
	r, err := request.FromSpec(spec, []string{"WSL_GPU_DEVICES", "NVIDIA_VISIBLE_DEVICES"}, "")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// summary is a plan in a form a table can state: the cgroup step, whether
// the mount namespace is entered, and each step's kind and target (with
// the source of binds and links, and "bound" for a bound node).
func summary(p Plan) []string {
	if p.Skip != "" {
		return []string{"skip"}
	}
	var out []string
	if p.Cgroup != CgroupNone {
		out = append(out, []string{"", "cgroup init", "cgroup self"}[p.Cgroup])
	}
	if p.EnterMountNS {
		out = append(out, "enter mountns")
	}
	for _, s := range p.Steps {
		line := string(s.Kind) + " " + s.Target
		switch {
		case s.Kind == mounts.Device && s.BindNode:
			line += " bound"
		case s.Kind == mounts.Bind, s.Kind == mounts.Symlink:
			line += " <- " + s.Source
		}
		out = append(out, line)
	}
	return out
}

var (
	node       = "device /dev/dxg"
	boundNode  = "device /dev/dxg bound"
	libDir     = "bind /usr/lib/wsl/lib <- /host/lib"
	intelBind  = "bind /usr/lib/wsl/drivers/" + intelFolder + " <- /host/drivers/" + intelFolder
	nvidiaBind = "bind /usr/lib/wsl/drivers/" + nvidiaFolder + " <- /host/drivers/" + nvidiaFolder
	ldconf     = "file /etc/ld.so.conf.d/wsl-gpu-hook.conf"
	cache      = "ldcache /etc/ld.so.cache"
	smiLib     = "symlink /usr/bin/nvidia-smi <- /usr/lib/wsl/lib/nvidia-smi"
	smiFolder  = "symlink /usr/bin/nvidia-smi <- /usr/lib/wsl/drivers/" + nvidiaFolder + "/nvidia-smi"
)

func TestDecide(t *testing.T) {
	tests := []struct {
		name    string
		c       func(t *testing.T) Container
		host    func(h *probed.Host)
		want    []string
		wantErr string
		// warnings is how many selected adapters go without their folder.
		warnings int
	}{
		{
			name: "no request",
			c:    func(t *testing.T) Container { return Container{Stage: Prestart, Pid: 1} },
			want: []string{"skip"},
		},
		{
			name: "void",
			c: func(t *testing.T) Container {
				return Container{Stage: Prestart, Pid: 1, Request: req(t, "WSL_GPU_DEVICES=void")}
			},
			want: []string{"skip"},
		},
		{
			name: "prestart, all: every usable folder, the AMD one left out with a warning",
			c: func(t *testing.T) Container {
				return Container{Stage: Prestart, Pid: 7, Request: req(t, "WSL_GPU_DEVICES=all")}
			},
			want:     []string{"cgroup init", "enter mountns", node, libDir, intelBind, nvidiaBind, ldconf, cache, smiLib},
			warnings: 1,
		},
		{
			name: "createRuntime enters the mount namespace too",
			c: func(t *testing.T) Container {
				return Container{Stage: CreateRuntime, Pid: 7, Request: req(t, "WSL_GPU_DEVICES=intel")}
			},
			want: []string{"cgroup init", "enter mountns", node, libDir, intelBind, ldconf, cache},
		},
		{
			name: "createContainer allows itself and stays where it is",
			c: func(t *testing.T) Container {
				return Container{Stage: CreateContainer, Request: req(t, "WSL_GPU_DEVICES=intel")}
			},
			want: []string{"cgroup self", node, libDir, intelBind, ldconf, cache},
		},
		{
			name: "prestart without a pid",
			c: func(t *testing.T) Container {
				return Container{Stage: Prestart, Request: req(t, "WSL_GPU_DEVICES=all")}
			},
			wantErr: "container state has no pid: run the hook as a prestart or createRuntime hook",
		},
		{
			name: "NVIDIA_VISIBLE_DEVICES=0 is the first NVIDIA adapter, not adapter 0",
			c: func(t *testing.T) Container {
				return Container{Stage: Prestart, Pid: 7, Request: req(t, "NVIDIA_VISIBLE_DEVICES=0")}
			},
			want: []string{"cgroup init", "enter mountns", node, libDir, nvidiaBind, ldconf, cache, smiLib},
		},
		{
			// libdxcore in the container builds the folder's path from the
			// registry's spelling, on a case-sensitive mount.
			name: "a folder the registry spells in another case is mounted under that spelling, the disk name a link to it",
			c: func(t *testing.T) Container {
				return Container{Stage: Prestart, Pid: 7, Request: req(t, "WSL_GPU_DEVICES=intel")}
			},
			host: func(h *probed.Host) { h.Inventory.Adapters[0].Registry = "IIGD_DCH.INF_AMD64_1" },
			want: []string{"cgroup init", "enter mountns", node, libDir,
				"bind /usr/lib/wsl/drivers/IIGD_DCH.INF_AMD64_1 <- /host/drivers/" + intelFolder,
				"symlink /usr/lib/wsl/drivers/" + intelFolder + " <- IIGD_DCH.INF_AMD64_1", ldconf, cache},
		},
		{
			name: "a registry spelling equal to the disk name adds no link",
			c: func(t *testing.T) Container {
				return Container{Stage: Prestart, Pid: 7, Request: req(t, "WSL_GPU_DEVICES=intel")}
			},
			host: func(h *probed.Host) { h.Inventory.Adapters[0].Registry = intelFolder },
			want: []string{"cgroup init", "enter mountns", node, libDir, intelBind, ldconf, cache},
		},
		{
			name: "WSL_GPU_DEVICES=0 is adapter 0",
			c: func(t *testing.T) Container {
				return Container{Stage: Prestart, Pid: 7, Request: req(t, "WSL_GPU_DEVICES=0")}
			},
			want: []string{"cgroup init", "enter mountns", node, libDir, intelBind, ldconf, cache},
		},
		{
			name: "a selector matching nothing fails",
			c: func(t *testing.T) Container {
				return Container{Stage: Prestart, Pid: 7, Request: req(t, "NVIDIA_VISIBLE_DEVICES=1")}
			},
			wantErr: "GPU selector 1 matches no adapter on this host",
		},
		{
			name: "the one adapter asked for has no folder: fail with its error",
			c: func(t *testing.T) Container {
				return Container{Stage: Prestart, Pid: 7, Request: req(t, "WSL_GPU_DEVICES=2")}
			},
			wantErr: errAMD.Error(),
		},
		{
			name: "two asked for, one without a folder: go on with a warning",
			c: func(t *testing.T) Container {
				return Container{Stage: Prestart, Pid: 7, Request: req(t, "WSL_GPU_DEVICES=0,2")}
			},
			want:     []string{"cgroup init", "enter mountns", node, libDir, intelBind, ldconf, cache},
			warnings: 1,
		},
		{
			name: "no selected adapter has a folder: fail with the first error",
			c: func(t *testing.T) Container {
				return Container{Stage: Prestart, Pid: 7, Request: req(t, "WSL_GPU_DEVICES=nvidia,amd")}
			},
			host: func(h *probed.Host) {
				h.Inventory.Adapters[1] = adapter(1, driverstore.NVIDIA, "", errNV)
			},
			wantErr: errNV.Error(),
		},
		{
			name: "all, no adapter has a folder: fail",
			c: func(t *testing.T) Container {
				return Container{Stage: Prestart, Pid: 7, Request: req(t, "WSL_GPU_DEVICES=all")}
			},
			host: func(h *probed.Host) {
				h.Inventory.Adapters = h.Inventory.Adapters[2:]
			},
			wantErr: errAMD.Error(),
		},
		{
			name: "nvidia-smi from the NVIDIA folder when the lib dir has none",
			c: func(t *testing.T) Container {
				return Container{Stage: Prestart, Pid: 7, Request: req(t, "WSL_GPU_DEVICES=nvidia")}
			},
			host: func(h *probed.Host) {
				h.NvidiaSmi = driverstore.NvidiaSmi{Folders: []string{nvidiaFolder}}
			},
			want: []string{"cgroup init", "enter mountns", node, libDir, nvidiaBind, ldconf, cache, smiFolder},
		},
		{
			name: "no nvidia-smi anywhere: no link",
			c: func(t *testing.T) Container {
				return Container{Stage: Prestart, Pid: 7, Request: req(t, "WSL_GPU_DEVICES=nvidia")}
			},
			host: func(h *probed.Host) { h.NvidiaSmi = driverstore.NvidiaSmi{} },
			want: []string{"cgroup init", "enter mountns", node, libDir, nvidiaBind, ldconf, cache},
		},
		{
			name: "nvidia-smi only in a folder the container does not get: no link",
			c: func(t *testing.T) Container {
				return Container{Stage: Prestart, Pid: 7, Request: req(t, "WSL_GPU_DEVICES=nvidia")}
			},
			host: func(h *probed.Host) { h.NvidiaSmi = driverstore.NvidiaSmi{Folders: []string{"nv_other"}} },
			want: []string{"cgroup init", "enter mountns", node, libDir, nvidiaBind, ldconf, cache},
		},
		{
			name: "ldcache = none: no cache step",
			c: func(t *testing.T) Container {
				return Container{Stage: Prestart, Pid: 7, Request: req(t, "WSL_GPU_DEVICES=intel")}
			},
			host: func(h *probed.Host) { h.Ldcache = nil },
			want: []string{"cgroup init", "enter mountns", node, libDir, intelBind, ldconf},
		},
		{
			name: "user-namespaced container: the host's node is bound",
			c: func(t *testing.T) Container {
				return Container{Stage: Prestart, Pid: 7, UserNamespace: true, Request: req(t, "WSL_GPU_DEVICES=intel")}
			},
			want: []string{"cgroup init", "enter mountns", boundNode, libDir, intelBind, ldconf, cache},
		},
		{
			name: "user-namespaced container whose runtime made the node: no device step",
			c: func(t *testing.T) Container {
				return Container{Stage: Prestart, Pid: 7, UserNamespace: true, RuntimeNode: true, Request: req(t, "WSL_GPU_DEVICES=intel")}
			},
			want: []string{"cgroup init", "enter mountns", libDir, intelBind, ldconf, cache},
		},
		{
			name: "the wrapper made the node (no user namespace): the hook still checks it",
			c: func(t *testing.T) Container {
				return Container{Stage: Prestart, Pid: 7, RuntimeNode: true, Request: req(t, "WSL_GPU_DEVICES=intel")}
			},
			want: []string{"cgroup init", "enter mountns", node, libDir, intelBind, ldconf, cache},
		},
		{
			name: "rootless hook: no cgroup, the node bound",
			c: func(t *testing.T) Container {
				return Container{Stage: Prestart, Pid: 7, Rootless: true, Request: req(t, "WSL_GPU_DEVICES=intel")}
			},
			want: []string{"enter mountns", boundNode, libDir, intelBind, ldconf, cache},
		},
		{
			name: "rootless createContainer hook: no cgroup at all",
			c: func(t *testing.T) Container {
				return Container{Stage: CreateContainer, Rootless: true, Request: req(t, "WSL_GPU_DEVICES=intel")}
			},
			want: []string{boundNode, libDir, intelBind, ldconf, cache},
		},
		{
			name: "a CDI device was injected: a second hook leaves the container alone",
			c: func(t *testing.T) Container {
				return Container{Stage: Prestart, Pid: 7, RuntimeNode: true, LibDirMounted: true, Request: req(t, "WSL_GPU_DEVICES=all")}
			},
			want: []string{"skip"},
		},
		{
			name: "the lib dir mounted by hand, no node: the hook gives the GPU",
			c: func(t *testing.T) Container {
				return Container{Stage: Prestart, Pid: 7, LibDirMounted: true, Request: req(t, "WSL_GPU_DEVICES=intel")}
			},
			want: []string{"cgroup init", "enter mountns", node, libDir, intelBind, ldconf, cache},
		},
		{
			name: "the CDI spec's own hook: the current folders, loader files and the nvidia-smi link",
			c: func(t *testing.T) Container {
				return Container{Stage: CreateContainer, RuntimeNode: true, LibDirMounted: true, Injected: true, Request: req(t, "WSL_GPU_DEVICES=nvidia")}
			},
			want: []string{nvidiaBind, ldconf, cache, smiLib},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := laptop()
			if tt.host != nil {
				tt.host(&h)
			}
			c := tt.c(t)
			p, err := Decide(c, h)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Decide error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Decide: %v", err)
			}
			if got := summary(p); !slices.Equal(got, tt.want) {
				t.Fatalf("plan\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(tt.want, "\n  "))
			}
			if len(p.Warnings) != tt.warnings {
				t.Fatalf("warnings %v, want %d", p.Warnings, tt.warnings)
			}
			// The cgroup step a createContainer hook takes before it
			// enumerates is the one the plan logs.
			if p.Skip == "" && p.Cgroup != c.Cgroup() {
				t.Fatalf("plan cgroup %v, container's %v", p.Cgroup, c.Cgroup())
			}
			if p.Skip == "" && p.Cgroup != CgroupNone && p.Node != h.Node {
				t.Fatalf("plan node %v, host's %v", p.Node, h.Node)
			}
		})
	}
}

func TestFromSpec(t *testing.T) {
	r := request.Selection{All: true}
	spec := &oci.Spec{
		Linux: &oci.Linux{Devices: nil},
	}
	if c := FromSpec(spec, Prestart, 3, r); c.RuntimeNode || c.LibDirMounted || c.UserNamespace {
		t.Fatalf("empty spec read as %+v", c)
	}
	data := `{"linux":{"devices":[{"path":"/dev/dxg","type":"c","major":10,"minor":63}],"namespaces":[{"type":"user"}]},
		"mounts":[{"destination":"/usr/lib/wsl/lib/","source":"/usr/lib/wsl/lib","options":["ro"]}]}`
	spec = decode(t, data)
	c := FromSpec(spec, CreateContainer, 3, r)
	want := Container{Stage: CreateContainer, Request: r, Pid: 3, RuntimeNode: true, LibDirMounted: true, UserNamespace: true}
	if c.Stage != want.Stage || c.Pid != want.Pid || c.RuntimeNode != want.RuntimeNode || c.LibDirMounted != want.LibDirMounted ||
		c.UserNamespace != want.UserNamespace || c.Rootless != want.Rootless || !c.Request.All {
		t.Fatalf("FromSpec = %+v, want %+v", c, want)
	}
}

func TestPlanString(t *testing.T) {
	c := Container{Stage: Prestart, Pid: 7, Request: req(t, "WSL_GPU_DEVICES=intel")}
	p, err := Decide(c, laptop())
	if err != nil {
		t.Fatal(err)
	}
	want := "cgroup c 10:63: allow in the container's device cgroup; device /dev/dxg c 10:63 0666; bind /host/lib -> /usr/lib/wsl/lib (ro,nosuid,nodev); " +
		"bind /host/drivers/" + intelFolder + " -> /usr/lib/wsl/drivers/" + intelFolder + " (ro,nosuid,nodev); " +
		"file /etc/ld.so.conf.d/wsl-gpu-hook.conf (17 bytes); ldcache /etc/ld.so.cache += [libcuda.so.1]"
	if p.String() != want {
		t.Fatalf("String()\n %s\nwant\n %s", p, want)
	}
	skip, _ := Decide(Container{Stage: Prestart}, laptop())
	if skip.String() != "no GPU requested (no request variable set): nothing to do" {
		t.Fatalf("skip String() = %q", skip)
	}
}

func TestStageValid(t *testing.T) {
	for _, s := range []Stage{Prestart, CreateRuntime, CreateContainer} {
		if !s.Valid() {
			t.Errorf("%s not valid", s)
		}
	}
	if Stage("poststart").Valid() {
		t.Error("poststart valid")
	}
}

func decode(t *testing.T, data string) *oci.Spec {
	t.Helper()
	var s oci.Spec
	if err := json.Unmarshal([]byte(data), &s); err != nil {
		t.Fatal(err)
	}
	return &s
}
