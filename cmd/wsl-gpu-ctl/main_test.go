package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/setup/doctor"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/cli"
)

func TestRunErrors(t *testing.T) {
	const missing, bad, empty = "testdata/none.toml", "testdata/bad.toml", "testdata/empty.toml"
	tests := []struct {
		name    string
		args    []string
		want    string
		isUsage bool
	}{
		{name: "no command", args: []string{"wsl-gpu-ctl"}, want: "no command given", isUsage: true},
		{name: "a hook stage is the hook's", args: []string{"wsl-gpu-ctl", "--config", empty, "prestart"}, want: `unknown command "prestart"`, isUsage: true},
		{name: "explicit config missing", args: []string{"wsl-gpu-ctl", "--config", missing, "doctor"}, want: "doctor: read config: open " + missing + ": no such file or directory: fix the configuration file"},
		{name: "bad config value", args: []string{"wsl-gpu-ctl", "--config", bad, "info"}, want: "info: config " + bad + ": key ldcache: \"fast\" is not one of builtin, none: fix the configuration file"},
		{name: "install without an engine", args: []string{"wsl-gpu-ctl", "--config", empty, "install"}, want: "install: name an engine: docker, podman, containerd, cdi or docker-desktop", isUsage: true},
		{name: "metrics sampled too often", args: []string{"wsl-gpu-ctl", "--config", empty, "metrics", "--interval", "100ms"}, want: "metrics: --interval must be at least 1s", isUsage: true},
		{name: "metrics web config missing", args: []string{"wsl-gpu-ctl", "--config", empty, "metrics", "--listen", "127.0.0.1:0", "--web-config-file", "testdata/none.yml"},
			want: "metrics: web configuration testdata/none.yml: open testdata/none.yml: no such file or directory: fix --web-config-file"},
		{name: "cdi without generate", args: []string{"wsl-gpu-ctl", "--config", empty, "cdi", "list"}, want: `cdi: unknown verb "list": want generate, keep`, isUsage: true},
		{name: "cdi generate flags that exclude each other", args: []string{"wsl-gpu-ctl", "--config", empty, "cdi", "generate", "--dir", "/d", "--output", "-"}, want: "cdi generate: --dir and --output exclude each other", isUsage: true},
		{name: "install names unknown engines before changing any", args: []string{"wsl-gpu-ctl", "--config", empty, "install", "--prefix", "/nonexistent", "docker", "dockr"}, want: `install: unknown engine "dockr" (docker, podman, containerd, cdi, docker-desktop)`, isUsage: true},
		{name: "doctor --k8s with --root", args: []string{"wsl-gpu-ctl", "--config", empty, "doctor", "--k8s", "--root", "/r"}, want: "doctor: --root is for the host checks; --k8s asks the engines: use one", isUsage: true},
		{name: "install cdi choice", args: []string{"wsl-gpu-ctl", "--config", empty, "install", "cdi", "--nvidia-kind=mine"}, want: `install: --nvidia-kind "mine": want ours or skip`, isUsage: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			err := run(context.Background(), tt.args, strings.NewReader(""), &out, &out)
			if err == nil || err.Error() != tt.want {
				t.Fatalf("run error = %v\nwant        %s", err, tt.want)
			}
			var u cli.UsageError
			if errors.As(err, &u) != tt.isUsage {
				t.Fatalf("usage error = %v, want %v", !tt.isUsage, tt.isUsage)
			}
		})
	}
}

// TestInstallFindsTheHook: install writes the wsl-gpu-hook next to
// wsl-gpu-ctl into engine configurations, never wsl-gpu-ctl itself; with
// no hook there it says so and changes nothing.
func TestInstallFindsTheHook(t *testing.T) {
	prefix := t.TempDir()
	var out bytes.Buffer
	err := run(context.Background(), []string{"wsl-gpu-ctl", "install", "--prefix", prefix, "docker"}, strings.NewReader(""), &out, &out)
	// The test binary has no wsl-gpu-hook beside it.
	if err == nil || !strings.Contains(err.Error(), "install: no wsl-gpu-hook next to ") {
		t.Fatalf("install without a hook beside: %v", err)
	}
	if entries, _ := os.ReadDir(prefix); len(entries) != 0 {
		t.Fatalf("install without a hook wrote %d entries under the prefix", len(entries))
	}
}

// TestDoctorK8sEngines: doctor --k8s runs the engines' CLIs found on PATH
// and hands their standard error to package doctor: a docker whose daemon
// is down and no podman are both skipped, and the exit status is 0.
func TestDoctorK8sEngines(t *testing.T) {
	bin := t.TempDir()
	docker := "#!/bin/sh\necho 'Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?' >&2\nexit 1\n"
	if err := os.WriteFile(filepath.Join(bin, "docker"), []byte(docker), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin)
	var out bytes.Buffer
	err := run(context.Background(), []string{"wsl-gpu-ctl", "--config", "testdata/empty.toml", "doctor", "--k8s", "--json"}, strings.NewReader(""), &out, &out)
	if err != nil {
		t.Fatalf("doctor --k8s: %v\n%s", err, out.String())
	}
	var rep doctor.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("doctor --k8s --json: %v\n%s", err, out.String())
	}
	want := []doctor.Result{
		{Check: "docker", Status: doctor.OK, Detail: "docker's daemon is not running (Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?): no node containers of it to check"},
		{Check: "podman", Status: doctor.OK, Detail: "podman is not on PATH: no node containers of it to check"},
	}
	if !slices.Equal(rep.Results, want) {
		t.Errorf("doctor --k8s:\n%+v\nwant\n%+v", rep.Results, want)
	}
}
