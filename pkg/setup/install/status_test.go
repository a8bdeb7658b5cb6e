package install

import (
	"errors"
	"testing"
)

// TestStateReadsWhatInstallWrites: after each engine's install, its State
// sees the wiring; after uninstall, it does not.
func TestStateReadsWhatInstallWrites(t *testing.T) {
	o := testOptions(t)
	for _, e := range []engine{Docker, Podman, Containerd} {
		p, err := e(o, false)
		if err != nil {
			t.Fatal(err)
		}
		if err := Apply(o, p); err != nil {
			t.Fatal(err)
		}
	}
	wrapper := o.BinDir + "/" + wrapperName

	d, err := DockerState(o)
	if err != nil || !d.Exists || !d.HasRuntime || d.RuntimePath != wrapper {
		t.Errorf("DockerState = %+v, %v; want the %s runtime %s", d, err, runtimeName, wrapper)
	}
	pd, err := PodmanState(o)
	if err != nil || pd.File != HooksDPackage || pd.HookPath != o.HookPath {
		t.Errorf("PodmanState = %+v, %v; want %s running %s", pd, err, HooksDPackage, o.HookPath)
	}
	for _, v2 := range []bool{false, true} {
		c, err := ContainerdState(o, v2)
		if err != nil || c.HandlerIn != ContainerdConfig || c.Binary != wrapper {
			t.Errorf("ContainerdState(v2=%t) = %+v, %v; want the handler in %s running %s", v2, c, err, ContainerdConfig, wrapper)
		}
	}

	for _, e := range []engine{Docker, Podman, Containerd} {
		p, err := e(o, true)
		if err != nil {
			t.Fatal(err)
		}
		if err := Apply(o, p); err != nil {
			t.Fatal(err)
		}
	}
	if d, err := DockerState(o); err != nil || d.HasRuntime {
		t.Errorf("after uninstall DockerState = %+v, %v; want no runtime", d, err)
	}
	if pd, err := PodmanState(o); err != nil || pd.File != "" {
		t.Errorf("after uninstall PodmanState = %+v, %v; want no file", pd, err)
	}
	if c, err := ContainerdState(o, true); err != nil || c.HandlerIn != "" || c.Exists {
		t.Errorf("after uninstall ContainerdState = %+v, %v; want no file, no handler", c, err)
	}
}

func TestDockerState(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		want       DockerStatus
		parseErr   bool
	}{
		{name: "missing", want: DockerStatus{}},
		{name: "empty object", file: `{}`, want: DockerStatus{Exists: true}},
		{name: "runtime and cdi off", file: `{"runtimes": {"wsl-gpu": {"path": "/usr/bin/wsl-gpu-runtime"}}, "features": {"cdi": false}}`,
			want: DockerStatus{Exists: true, HasRuntime: true, RuntimePath: "/usr/bin/wsl-gpu-runtime", CDISet: true}},
		{name: "cdi on", file: `{"features": {"cdi": true}}`, want: DockerStatus{Exists: true, CDISet: true, CDI: true}},
		{name: "other runtime only", file: `{"runtimes": {"nvidia": {"path": "/usr/bin/nvidia-container-runtime"}}}`, want: DockerStatus{Exists: true}},
		{name: "broken", file: `{"runtimes": `, parseErr: true},
		{name: "wrong type", file: `{"runtimes": []}`, parseErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := testOptions(t)
			if tc.file != "" {
				write(t, o, DaemonJSON, []byte(tc.file))
			}
			got, err := DockerState(o)
			var pe *ParseError
			if tc.parseErr != errors.As(err, &pe) || !tc.parseErr && err != nil {
				t.Fatalf("err = %v, want a ParseError: %t", err, tc.parseErr)
			}
			if !tc.parseErr && got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestPodmanState(t *testing.T) {

	for _, tc := range []struct {
		name       string
		pkg, admin string
		want       PodmanStatus
		parseErrIn string
	}{
		{name: "none"},
		{name: "package file", pkg: `{"hook": {"path": "/usr/bin/wsl-gpu-hook"}}`, want: PodmanStatus{File: HooksDPackage, HookPath: "/usr/bin/wsl-gpu-hook"}},
		{name: "admin masks package", pkg: `{"hook": {"path": "/usr/bin/wsl-gpu-hook"}}`, admin: `{"hook": {"path": "/usr/local/bin/wsl-gpu-hook"}}`,
			want: PodmanStatus{File: HooksDAdmin, HookPath: "/usr/local/bin/wsl-gpu-hook"}},
		{name: "broken admin file", pkg: `{"hook": {"path": "/usr/bin/wsl-gpu-hook"}}`, admin: `{"hook": `, parseErrIn: HooksDAdmin},
		{name: "no hook path", pkg: `{"version": "1.0.0"}`, parseErrIn: HooksDPackage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := testOptions(t)
			if tc.pkg != "" {
				write(t, o, HooksDPackage, []byte(tc.pkg))
			}
			if tc.admin != "" {
				write(t, o, HooksDAdmin, []byte(tc.admin))
			}
			got, err := PodmanState(o)
			var pe *ParseError
			if tc.parseErrIn != "" {
				if !errors.As(err, &pe) || pe.Path != tc.parseErrIn || got.File != tc.parseErrIn {
					t.Fatalf("got %+v, %v; want a ParseError in %s", got, err, tc.parseErrIn)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestContainerdState(t *testing.T) {
	const v3handler = "version = 3\n[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.wsl-gpu.options]\nBinaryName = '/usr/bin/wsl-gpu-runtime'\n"
	for _, tc := range []struct {
		name     string
		v2       bool
		files    map[string]string
		want     ContainerdStatus
		parseErr bool
	}{
		{name: "nothing, containerd 1", want: ContainerdStatus{Version: 1, Plugin: "cri"}},
		{name: "nothing, containerd 2", v2: true, want: ContainerdStatus{Version: 3, Plugin: "io.containerd.cri.v1.runtime"}},
		{name: "v2 with cdi", files: map[string]string{ContainerdConfig: "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\"]\nenable_cdi = true\n"},
			want: ContainerdStatus{Exists: true, Version: 2, Plugin: "io.containerd.grpc.v1.cri", CDISet: true, CDI: true}},
		{name: "v3 handler", v2: true, files: map[string]string{ContainerdConfig: v3handler},
			want: ContainerdStatus{Exists: true, Version: 3, Plugin: "io.containerd.cri.v1.runtime", HandlerIn: ContainerdConfig, Binary: "/usr/bin/wsl-gpu-runtime"}},
		{name: "handler in an import", v2: true, files: map[string]string{
			ContainerdConfig:                 "version = 3\nimports = ['/etc/containerd/extra/*.toml']\n",
			"/etc/containerd/extra/gpu.toml": v3handler,
		}, want: ContainerdStatus{Exists: true, Version: 3, Plugin: "io.containerd.cri.v1.runtime", HandlerIn: "/etc/containerd/extra/gpu.toml", Binary: "/usr/bin/wsl-gpu-runtime"}},
		{name: "handler in a drop-in, no config.toml", v2: true, files: map[string]string{"/etc/containerd/conf.d/gpu.toml": v3handler},
			want: ContainerdStatus{Version: 3, Plugin: "io.containerd.cri.v1.runtime", HandlerIn: "/etc/containerd/conf.d/gpu.toml", Binary: "/usr/bin/wsl-gpu-runtime"}},
		{name: "drop-in not read when config.toml imports nothing", v2: true, files: map[string]string{ContainerdConfig: "version = 3\n", "/etc/containerd/conf.d/gpu.toml": v3handler},
			want: ContainerdStatus{Exists: true, Version: 3, Plugin: "io.containerd.cri.v1.runtime"}},
		{name: "broken import skipped", v2: true, files: map[string]string{ContainerdConfig: "version = 3\nimports = ['/etc/containerd/extra/*.toml']\n", "/etc/containerd/extra/bad.toml": "= ="},
			want: ContainerdStatus{Exists: true, Version: 3, Plugin: "io.containerd.cri.v1.runtime"}},
		{name: "broken", files: map[string]string{ContainerdConfig: "version = = 2\n"}, parseErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := testOptions(t)
			for p, c := range tc.files {
				write(t, o, p, []byte(c))
			}
			got, err := ContainerdState(o, tc.v2)
			var pe *ParseError
			if tc.parseErr != errors.As(err, &pe) || !tc.parseErr && err != nil {
				t.Fatalf("err = %v, want a ParseError: %t", err, tc.parseErr)
			}
			if !tc.parseErr && got != tc.want {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}
