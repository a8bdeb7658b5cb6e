package wrapper

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/config"
)

func TestParseArgs(t *testing.T) {
	const cwd = "/run/cwd-bundle"
	tests := []struct {
		name string
		args []string
		want Args
	}{
		{
			name: "containerd shim",
			args: []string{"--root", "/run/containerd/runc/k8s.io", "--log", "/run/x/log.json", "--log-format", "json", "create", "--bundle", "/run/b", "--pid-file", "/run/b/init.pid", "c1"},
			want: Args{Command: "create", Bundle: "/run/b", LogFile: "/run/x/log.json", LogFormat: "json"},
		},
		{
			name: "docker style equals",
			args: []string{"--root=/var/run/docker/runtime-runc/moby", "--log=/l", "--log-format=json", "--systemd-cgroup", "create", "--bundle=/b2", "--pid-file", "/p", "--console-socket", "/s", "id"},
			want: Args{Command: "create", Bundle: "/b2", LogFile: "/l", LogFormat: "json"},
		},
		{name: "short bundle flag", args: []string{"run", "-b", "/b3", "-d", "id"}, want: Args{Command: "run", Bundle: "/b3"}},
		{name: "short bundle equals", args: []string{"run", "-b=/b4", "id"}, want: Args{Command: "run", Bundle: "/b4"}},
		// runc runs a bundle in its working directory when none is named.
		{name: "no bundle: the working directory", args: []string{"--log", "/l", "run", "-d", "id"}, want: Args{Command: "run", Bundle: cwd, LogFile: "/l"}},
		{name: "bundle flag without a value: the working directory", args: []string{"create", "--bundle"}, want: Args{Command: "create", Bundle: cwd}},
		{name: "state passes through", args: []string{"--root", "/r", "state", "id"}, want: Args{Command: "state", Bundle: cwd}},
		{name: "no command, no bundle", args: []string{"--version"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ParseArgs(tt.args, cwd); got != tt.want {
				t.Fatalf("ParseArgs = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestRealRuntime(t *testing.T) {
	dir := t.TempDir()
	self := filepath.Join(dir, "wsl-gpu-hook")
	runc := filepath.Join(dir, "runc")
	for _, p := range []string{self, runc} {
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(self, filepath.Join(dir, "wsl-gpu-runtime")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
	if got, err := RealRuntime("runc", self); err != nil || got != runc {
		t.Fatalf("RealRuntime(runc) = %q, %v, want %q", got, err, runc)
	}
	if _, err := RealRuntime("wsl-gpu-runtime", self); err == nil || !strings.Contains(err.Error(), `the configured runtime "wsl-gpu-runtime" is this wrapper itself`) {
		t.Fatalf("RealRuntime of the wrapper itself: %v", err)
	}
	if _, err := RealRuntime("crun", self); err == nil || !strings.Contains(err.Error(), `find the real OCI runtime "crun"`) || !strings.Contains(err.Error(), "install runc or set runtime in the config") {
		t.Fatalf("RealRuntime of a missing runtime: %v", err)
	}
}

// bundle writes a config.json with env and returns the bundle directory.
func bundle(t *testing.T, env string) string {
	t.Helper()
	dir := t.TempDir()
	cfg := `{"ociVersion":"1.2.0","process":{"env":[` + env + `]},"root":{"path":"rootfs"},"linux":{}}`
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

type patched struct {
	Hooks struct {
		Prestart []struct {
			Path string
			Args []string
		}
	}
	Linux struct {
		Devices []struct {
			Path         string
			Type         string
			Major, Minor int64
		}
	}
}

func TestPatchBundle(t *testing.T) {
	cfg := config.Default()
	// /dev/null is a character device (1:3) every machine has and anyone
	// may stat: it stands in for /dev/dxg.
	cfg.DxgDevice = "/dev/null"
	o := Options{Config: cfg, Self: "/usr/bin/wsl-gpu-hook", ConfigPath: "/etc/x.toml", ExplicitConfig: true}

	t.Run("a GPU request gets the node and the hook", func(t *testing.T) {
		b := bundle(t, `"NVIDIA_VISIBLE_DEVICES=all"`)
		if err := PatchBundle(b, o); err != nil {
			t.Fatal(err)
		}
		data, _ := os.ReadFile(filepath.Join(b, "config.json"))
		var p patched
		if err := json.Unmarshal(data, &p); err != nil {
			t.Fatal(err)
		}
		if len(p.Linux.Devices) != 1 || p.Linux.Devices[0].Path != "/dev/dxg" || p.Linux.Devices[0].Major != 1 || p.Linux.Devices[0].Minor != 3 {
			t.Fatalf("devices %+v, want /dev/dxg c 1:3", p.Linux.Devices)
		}
		want := "/usr/bin/wsl-gpu-hook wsl-gpu-hook --config /etc/x.toml prestart"
		if len(p.Hooks.Prestart) != 1 || p.Hooks.Prestart[0].Path+" "+strings.Join(p.Hooks.Prestart[0].Args, " ") != want {
			t.Fatalf("prestart hooks %+v, want %s", p.Hooks.Prestart, want)
		}
		if fi, err := os.Stat(filepath.Join(b, "config.json")); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("config.json mode changed: %v %v", fi.Mode(), err)
		}
	})
	t.Run("the default config is not passed on", func(t *testing.T) {
		b := bundle(t, `"WSL_GPU_DEVICES=0"`)
		o := o
		o.ExplicitConfig = false
		if err := PatchBundle(b, o); err != nil {
			t.Fatal(err)
		}
		data, _ := os.ReadFile(filepath.Join(b, "config.json"))
		if !strings.Contains(string(data), `"args":["wsl-gpu-hook","prestart"]`) {
			t.Fatalf("config.json: %s", data)
		}
	})
	for _, tt := range []struct{ name, env, wantErr string }{
		{name: "no request: untouched", env: `"PATH=/bin"`},
		{name: "void: untouched", env: `"NVIDIA_VISIBLE_DEVICES=void"`},
		{name: "bad request: untouched, an error", env: `"WSL_GPU_DEVICES=GPU-1234"`, wantErr: "GPU UUIDs do not exist on WSL"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := bundle(t, tt.env)
			before, _ := os.ReadFile(filepath.Join(b, "config.json"))
			err := PatchBundle(b, o)
			if (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("PatchBundle error = %v, want %q", err, tt.wantErr)
			}
			after, _ := os.ReadFile(filepath.Join(b, "config.json"))
			if string(before) != string(after) {
				t.Fatalf("config.json changed:\n%s", after)
			}
		})
	}
	t.Run("no device: the line says so", func(t *testing.T) {
		o := o
		o.Config.DxgDevice = filepath.Join(t.TempDir(), "dxg")
		err := PatchBundle(bundle(t, `"WSL_GPU_DEVICES=all"`), o)
		if err == nil || !strings.Contains(err.Error(), "not a WSL2 VM with GPU paravirtualization") {
			t.Fatalf("PatchBundle error = %v", err)
		}
	})
	t.Run("no bundle", func(t *testing.T) {
		if err := PatchBundle(t.TempDir(), o); err == nil || !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("PatchBundle error = %v", err)
		}
	})
}

func TestWriteLog(t *testing.T) {
	now := time.Date(2026, 11, 23, 4, 0, 0, 0, time.UTC)
	dir := t.TempDir()
	j := filepath.Join(dir, "log.json")
	WriteLog(j, "json", "wsl-gpu-hook: runtime: x", now)
	WriteLog(j, "json", "second", now)
	data, _ := os.ReadFile(j)
	want := `{"level":"error","msg":"wsl-gpu-hook: runtime: x","time":"2026-11-23T04:00:00Z"}` + "\n" +
		`{"level":"error","msg":"second","time":"2026-11-23T04:00:00Z"}` + "\n"
	if string(data) != want {
		t.Fatalf("json log:\n%s\nwant\n%s", data, want)
	}
	txt := filepath.Join(dir, "log")
	WriteLog(txt, "", `a "quoted" line`, now)
	data, _ = os.ReadFile(txt)
	if string(data) != `time="2026-11-23T04:00:00Z" level=error msg="a \"quoted\" line"`+"\n" {
		t.Fatalf("text log: %s", data)
	}
	if err := WriteLog("", "json", "nowhere", now); err != nil { // no --log: nothing
		t.Errorf("WriteLog without a log: %v", err)
	}
	if err := WriteLog(filepath.Join(dir, "no", "such"), "json", "x", now); err == nil {
		t.Errorf("WriteLog into a missing directory: no error")
	}
}

func TestOneLine(t *testing.T) {
	if got := oneLine("config x: key a: bad\nconfig x: key b: bad"); got != "config x: key a: bad; config x: key b: bad" {
		t.Fatalf("oneLine = %q", got)
	}
}

// TestWriteLogRefuses: runc's --log file is opened as root in the
// engine's directory with the hook log's rules (hooklog.OpenFile): a
// symbolic link or a log others may write is not written, and the file a
// link points at is unchanged.
func TestWriteLogRefuses(t *testing.T) {
	now := time.Date(2026, 11, 23, 4, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		name string
		make func(t *testing.T, dir, target string) string
		want string
	}{
		{"symbolic link", func(t *testing.T, dir, target string) string {
			p := filepath.Join(dir, "log.json")
			if err := os.Symlink(target, p); err != nil {
				t.Fatal(err)
			}
			return p
		}, "is a symlink: not writing it; remove it"},
		{"writable by others", func(t *testing.T, dir, _ string) string {
			p := filepath.Join(dir, "log.json")
			if err := os.WriteFile(p, nil, 0o666); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(p, 0o666); err != nil { // past the umask
				t.Fatal(err)
			}
			return p
		}, "is writable by group or others"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			target := filepath.Join(dir, "target")
			if err := os.WriteFile(target, []byte("kept\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			p := tt.make(t, dir, target)
			err := WriteLog(p, "json", "wsl-gpu-hook: runtime: x", now)
			if data, _ := os.ReadFile(target); string(data) != "kept\n" {
				t.Errorf("%s was written: %q", target, data)
			}
			if err == nil || !strings.Contains(err.Error(), "log "+p+": "+tt.want) {
				t.Errorf("WriteLog error %v, want one saying %q", err, tt.want)
			}
		})
	}
}
