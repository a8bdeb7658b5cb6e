package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/cli"
)

func TestRunErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "none.toml")
	bad := filepath.Join(t.TempDir(), "bad.toml")
	if err := os.WriteFile(bad, []byte("ldcache = \"fast\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(t.TempDir(), "empty.toml")
	if err := os.WriteFile(empty, []byte("log_file = \"\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		args    []string
		stdin   string
		want    string
		isUsage bool
	}{
		{name: "no command", args: []string{"wsl-gpu-hook"}, want: "no command given", isUsage: true},
		{name: "unknown command", args: []string{"wsl-gpu-hook", "--config", empty, "start"}, want: `unknown command "start"`, isUsage: true},
		{name: "explicit config missing", args: []string{"wsl-gpu-hook", "--config", missing, "prestart"}, want: "prestart: read config: open " + missing + ": no such file or directory: fix the configuration file"},
		{name: "bad config value", args: []string{"wsl-gpu-hook", "--config", bad, "createContainer"}, want: "createContainer: config " + bad + ": key ldcache: \"fast\" is not one of builtin, none: fix the configuration file"},
		{name: "cdi-hook argument not a selection", args: []string{"wsl-gpu-hook", "--config", empty, "cdi-hook", "vendor:nvidia", "gpu0"}, stdin: `{"bundle":"/b","pid":1}`,
			want: `cdi-hook: hook argument: selection "gpu0": want all, vendor:NAME, vendor:NAME:N, index:N or luid:0xHEX: the CDI spec is damaged: regenerate it with wsl-gpu-hook cdi generate`},
		{name: "hook without state", args: []string{"wsl-gpu-hook", "--config", empty, "prestart"}, want: "prestart: no container state on stdin: run this as an OCI hook (runc passes the state on stdin)"},
		{name: "docker's name for the hook", args: []string{"/usr/bin/nvidia-container-runtime-hook", "--config", empty, "prestart"}, stdin: "{", want: "prestart: decode container state from stdin: unexpected end of JSON input"},
		{name: "stage takes no arguments", args: []string{"wsl-gpu-hook", "--config", empty, "createRuntime", "x"}, want: "createRuntime takes no arguments", isUsage: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			err := run(context.Background(), tt.args, strings.NewReader(tt.stdin), &out, &out)
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

// TestAdminCommands: the commands people type are wsl-gpu-ctl's; run hands
// them to main (which replaces the process with wsl-gpu-ctl) before it
// reads the configuration, which wsl-gpu-ctl reads itself.
func TestAdminCommands(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "none.toml")
	for _, cmd := range []string{"info", "doctor", "cdi", "install", "uninstall"} {
		err := run(context.Background(), []string{"wsl-gpu-hook", "--config", missing, cmd, "--json"}, strings.NewReader(""), io.Discard, io.Discard)
		var admin adminCommand
		if !errors.As(err, &admin) || admin.name != cmd {
			t.Errorf("run %s = %v, want it handed to wsl-gpu-ctl", cmd, err)
		}
	}
}
