package hookrun

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/config"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/driverstore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/dxcore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/gpuplan"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/hooklog"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/hookroot"
)

// bundle writes a bundle whose config.json has spec's members and returns
// its path and a state for it.
func bundle(t *testing.T, spec string) (string, string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "rootfs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"root":{"path":"rootfs"}`+spec+`}`), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, fmt.Sprintf(`{"ociVersion":"1.0.2","id":"c","status":"creating","pid":42,"bundle":%q}`, dir)
}

const cdiSpec = `,"linux":{"devices":[{"path":"/dev/dxg","type":"c","major":10,"minor":63}]},
	"mounts":[{"destination":"/usr/lib/wsl/lib","source":"/usr/lib/wsl/lib","type":"bind"}]`

func TestOCI(t *testing.T) {
	tests := []struct {
		name, spec string
		stage      gpuplan.Stage
		done       string
		quiet      bool
		details    bool
		wantErr    string
	}{
		{name: "no request", spec: `,"process":{"env":["PATH=/bin"]}`, stage: gpuplan.Prestart, done: "no GPU requested (no request variable set): nothing to do", quiet: true, details: true},
		{name: "a CDI device already", spec: `,"annotations":{"wsl-gpu-hook/devices":"all"}` + cdiSpec, stage: gpuplan.Prestart, done: "the container has the GPU already"},
		{name: "all", spec: `,"process":{"env":["WSL_GPU_DEVICES=all"]}`, stage: gpuplan.CreateRuntime},
		{name: "one adapter reads details", spec: `,"process":{"env":["NVIDIA_VISIBLE_DEVICES=0"]}`, stage: gpuplan.Prestart, details: true},
		{name: "bad request", spec: `,"process":{"env":["WSL_GPU_DEVICES=GPU-0"]}`, stage: gpuplan.Prestart,
			wantErr: `env WSL_GPU_DEVICES: GPU selector "GPU-0": GPU UUIDs do not exist on WSL: select by index, LUID or vendor (see wsl-gpu-hook info): fix the container's GPU request`},
		{name: "bad capability", spec: `,"process":{"env":["WSL_GPU_DEVICES=all","WSL_GPU_CAPABILITIES=teleport"]}`, stage: gpuplan.Prestart, wantErr: "fix the container's GPU request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir, st := bundle(t, tt.spec)
			j, err := OCI(tt.stage, config.Default(), strings.NewReader(st))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(j.Done, tt.done) || (tt.done == "") != (j.Done == "") || j.Quiet != tt.quiet {
				t.Errorf("done %q quiet %v, want %q %v", j.Done, j.Quiet, tt.done, tt.quiet)
			}
			c := j.Container
			if j.Rootfs != filepath.Join(dir, "rootfs") || j.Bundle != dir || c.Stage != tt.stage || c.Pid != 42 || c.Injected || j.Resolve != nil || j.Details != tt.details {
				t.Errorf("job %+v", j)
			}
		})
	}
}

// opened is what an entry asked hookroot to open.
type opened struct {
	path   string
	src    hookroot.Source
	bundle string
}

// fakeOpen stands in for hookroot.Open, which takes only a root
// filesystem a runtime prepared (TestCDIRefusesForeignRoots runs the real
// one): it records what it was asked and takes it.
func fakeOpen(got *[]opened) opener {
	return func(path string, src hookroot.Source, bundle string) (*hookroot.Root, error) {
		*got = append(*got, opened{path, src, bundle})
		return &hookroot.Root{FD: -1, Path: "/proven"}, nil
	}
}

// TestCDI: the CDI device's hook reads its selections from its arguments
// and has hookroot prove its root filesystem: crun's state root, else the
// working directory (runc's fchdir); it never reads config.json. An old
// spec's hook (no arguments) reads the environment and root.path there.
func TestCDI(t *testing.T) {
	inv := []driverstore.Adapter{
		{Adapter: dxcore.Adapter{Index: 0}, Vendor: driverstore.Intel},
		{Adapter: dxcore.Adapter{Index: 1}, Vendor: driverstore.NVIDIA},
	}
	t.Run("arguments", func(t *testing.T) {
		// config.json unreadable as it is to a remapped root: a directory.
		dir, st := bundle(t, "")
		os.Remove(filepath.Join(dir, "config.json"))
		os.Mkdir(filepath.Join(dir, "config.json"), 0o700)
		var got []opened
		j, err := cdi(strings.NewReader(st), []string{"vendor:nvidia"}, fakeOpen(&got))
		if err != nil {
			t.Fatal(err)
		}
		c := j.Container
		if j.Done != "" || !c.Injected || c.Stage != gpuplan.CreateContainer || c.EntersMountNS() || c.Cgroup() != gpuplan.CgroupNone || j.Details || j.Rootfs != "/proven" || j.Root == nil {
			t.Errorf("job %+v", j)
		}
		if want := []opened{{".", hookroot.WorkingDir, dir}}; !slices.Equal(got, want) {
			t.Errorf("opened %+v, want %+v", got, want)
		}
		req, err := j.Resolve(inv)
		if err != nil || len(req.Selectors) != 1 || req.Selectors[0].Index != 1 {
			t.Errorf("vendor:nvidia resolves to %+v, %v; want adapter 1", req, err)
		}
	})
	t.Run("crun's state root", func(t *testing.T) {
		dir, st := bundle(t, "")
		var got []opened
		st = strings.TrimSuffix(st, "}") + `,"root":"rootfs"}`
		if _, err := cdi(strings.NewReader(st), []string{"all"}, fakeOpen(&got)); err != nil {
			t.Fatal(err)
		}
		if want := []opened{{filepath.Join(dir, "rootfs"), hookroot.StateRoot, dir}}; !slices.Equal(got, want) {
			t.Errorf("opened %+v, want %+v", got, want)
		}
	})
	t.Run("bad selection", func(t *testing.T) {
		_, st := bundle(t, "")
		var got []opened
		if _, err := cdi(strings.NewReader(st), []string{"vendor:"}, fakeOpen(&got)); err == nil || len(got) > 0 {
			t.Errorf("accepted, or opened %+v", got)
		}
	})
	t.Run("an old spec: the environment and root.path", func(t *testing.T) {
		dir, st := bundle(t, `,"process":{"env":["WSL_GPU_CDI_NVIDIA_COM_GPU_ALL=vendor:nvidia"]}`+cdiSpec)
		var got []opened
		j, err := cdi(strings.NewReader(st), nil, fakeOpen(&got))
		if err != nil || j.Done != "" || !j.Container.Injected || !j.Container.RuntimeNode {
			t.Fatalf("%+v, %v", j, err)
		}
		if want := []opened{{filepath.Join(dir, "rootfs"), hookroot.ConfigRoot, dir}}; !slices.Equal(got, want) {
			t.Errorf("opened %+v, want %+v", got, want)
		}
	})
	t.Run("no device of ours: nothing opened", func(t *testing.T) {
		_, st := bundle(t, `,"process":{"env":["PATH=/bin"]}`)
		var got []opened
		j, err := cdi(strings.NewReader(st), nil, fakeOpen(&got))
		if err != nil || j.Done != "no CDI device of ours selects an adapter: nothing to do" || len(got) > 0 {
			t.Fatalf("%+v, %v, opened %+v", j, err, got)
		}
	})
}

// TestRunDone: a job with nothing to do says why in the log and touches
// nothing: not even the device, which here does not exist.
func TestRunDone(t *testing.T) {
	cfg := config.Default()
	cfg.DxgDevice = filepath.Join(t.TempDir(), "no-dxg")
	for _, quiet := range []bool{false, true} {
		var buf bytes.Buffer
		j := &Job{Done: "nothing to do here", Quiet: quiet}
		if err := j.Run(cfg, hooklog.New(&buf, hooklog.Info)); err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(buf.String(), "nothing to do here"); got == quiet {
			t.Errorf("quiet %v: log %q", quiet, buf.String())
		}
	}
}
