package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestHookWiring runs the hook command up to where it would need a WSL
// host: what it leaves alone, and the line it fails with.
func TestHookWiring(t *testing.T) {
	dir := t.TempDir()
	logFile := filepath.Join(dir, "hook.log")
	cfg := filepath.Join(dir, "config.toml")
	// /dev/null passes the device's stat (a character device) and fails
	// enumeration: no test here reaches a host.
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("dxg_device = \"/dev/null\"\nlog_file = %q\nlog_level = \"debug\"\nlog_syslog = \"\"\n", logFile)), 0o644); err != nil {
		t.Fatal(err)
	}
	cdi := `"linux":{"devices":[{"path":"/dev/dxg","type":"c","major":10,"minor":63}]},
		"mounts":[{"destination":"/usr/lib/wsl/lib","source":"/usr/lib/wsl/lib","type":"bind"}]`
	tests := []struct {
		name, spec, stage, wantErr, wantLog string
	}{
		{name: "no request", spec: `"process":{"env":["PATH=/bin"]}`, stage: "prestart", wantLog: "no GPU requested (no request variable set): nothing to do"},
		{name: "void", spec: `"process":{"env":["NVIDIA_VISIBLE_DEVICES=void"]}`, stage: "createRuntime", wantLog: "no GPU requested (env NVIDIA_VISIBLE_DEVICES): nothing to do"},
		{name: "a CDI device already", spec: `"annotations":{"wsl-gpu-hook/devices":"all"},` + cdi, stage: "prestart", wantLog: "the container has the GPU already"},
		{name: "bad request", spec: `"process":{"env":["WSL_GPU_DEVICES=GPU-0"]}`, stage: "prestart",
			wantErr: `prestart: env WSL_GPU_DEVICES: GPU selector "GPU-0": GPU UUIDs do not exist on WSL: select by index, LUID or vendor (see wsl-gpu-hook info): fix the container's GPU request`},
		{name: "not a dxg device", spec: `"process":{"env":["WSL_GPU_DEVICES=all"]}`, stage: "prestart", wantErr: "prestart: "},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bundle := filepath.Join(dir, fmt.Sprint(i))
			if err := os.MkdirAll(bundle, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(bundle, "config.json"), []byte(`{"root":{"path":"rootfs"},`+tt.spec+`}`), 0o644); err != nil {
				t.Fatal(err)
			}
			state := fmt.Sprintf(`{"ociVersion":"1.0.2","id":"c","status":"creating","pid":1,"bundle":%q}`, bundle)
			var out bytes.Buffer
			err := run(context.Background(), []string{"wsl-gpu-hook", "--config", cfg, tt.stage}, strings.NewReader(state), &out, &out)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("run: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.wantErr)):
				t.Fatalf("run error = %v, want %q", err, tt.wantErr)
			}
			log, _ := os.ReadFile(logFile)
			if tt.wantLog != "" && !strings.Contains(string(log), tt.wantLog) {
				t.Fatalf("log lacks %q:\n%s", tt.wantLog, log)
			}
		})
	}
}

// TestHookLogCannotOpen: a log file that cannot be opened costs the user
// nothing but one line on stderr saying why and what to do: the hook runs
// as it would, and its error line is unchanged.
func TestHookLogCannotOpen(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.toml")
	logFile := filepath.Join(dir, "missing", "hook.log")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("dxg_device = \"/dev/null\"\nlog_file = %q\nlog_level = \"debug\"\nlog_syslog = \"\"\n", logFile)), 0o644); err != nil {
		t.Fatal(err)
	}
	bundle := filepath.Join(dir, "bundle")
	if err := os.MkdirAll(bundle, 0o755); err != nil {
		t.Fatal(err)
	}
	state := fmt.Sprintf(`{"ociVersion":"1.0.2","id":"c","status":"creating","pid":1,"bundle":%q}`, bundle)
	tests := []struct{ name, env, wantErr string }{
		{name: "no request", env: "PATH=/bin"},
		{name: "bad request", env: "WSL_GPU_DEVICES=GPU-0", wantErr: `prestart: env WSL_GPU_DEVICES: GPU selector "GPU-0": GPU UUIDs do not exist on WSL`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := os.WriteFile(filepath.Join(bundle, "config.json"), []byte(`{"root":{"path":"rootfs"},"process":{"env":[`+strconv.Quote(tt.env)+`]}}`), 0o644); err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			err := run(context.Background(), []string{"wsl-gpu-hook", "--config", cfg, "prestart"}, strings.NewReader(state), &out, &out)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("run: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.wantErr)):
				t.Fatalf("run error = %v, want %q", err, tt.wantErr)
			}
			if want := "wsl-gpu-hook: log " + logFile + ": open: no such file or directory: not writing it; mkdir -p " + filepath.Dir(logFile) + " or set log_file\n"; out.String() != want {
				t.Errorf("the hook printed %q, want %q", out.String(), want)
			}
			if _, err := os.Stat(filepath.Dir(logFile)); err == nil {
				t.Errorf("the hook made the log's directory")
			}
		})
	}
}
