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

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/cli"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/wsl"
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
		{name: "stage takes no arguments", args: []string{"wsl-gpu-hook", "--config", empty, "createRuntime", "x"}, want: "createRuntime: takes no arguments", isUsage: true},
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

// runMain is main without the exec and the exit: the status, stdout and
// stderr.
func runMain(args ...string) (int, string, string, error) {
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), args, strings.NewReader(""), &stdout, &stderr)
	code := cli.Report(&stdout, &stderr, "wsl-gpu-hook", err)
	return code, stdout.String(), stderr.String(), err
}

// TestHelp: the hook and each of its own commands print their help on
// stdout and exit 0 for --help, -h and help COMMAND, reading no
// configuration for it; wsl-gpu-ctl's commands are handed over with the
// help word (wsl-gpu-ctl answers it).
func TestHelp(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "none.toml")
	tests := []struct {
		args []string
		want string // the help's start
	}{
		{[]string{"--help"}, "usage: wsl-gpu-hook [--config FILE] COMMAND [ARGS...]"},
		{[]string{"-h"}, "usage: wsl-gpu-hook [--config FILE] COMMAND [ARGS...]"},
		{[]string{"help"}, "usage: wsl-gpu-hook [--config FILE] COMMAND [ARGS...]"},
		{[]string{"--config", missing, "--help", "prestart"}, "usage: wsl-gpu-hook [--config FILE] COMMAND [ARGS...]"},
		{[]string{"--config", missing, "prestart", "--help"}, "usage: wsl-gpu-hook [--config FILE] prestart"},
		{[]string{"createRuntime", "-h"}, "usage: wsl-gpu-hook [--config FILE] createRuntime"},
		{[]string{"help", "createContainer"}, "usage: wsl-gpu-hook [--config FILE] createContainer"},
		{[]string{"--config", missing, "cdi-hook", "--help"}, "usage: wsl-gpu-hook [--config FILE] cdi-hook SELECTION..."},
		{[]string{"help", "cdi-hook"}, "usage: wsl-gpu-hook [--config FILE] cdi-hook SELECTION..."},
		{[]string{"runtime", "--help"}, "usage: wsl-gpu-hook runtime RUNC-ARGS..."},
		{[]string{"help", "runtime"}, "usage: wsl-gpu-hook runtime RUNC-ARGS..."},
		{[]string{"version", "-h"}, "usage: wsl-gpu-hook version"},
		{[]string{"help", "version"}, "usage: wsl-gpu-hook version"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, stdout, stderr, _ := runMain(append([]string{"wsl-gpu-hook"}, tt.args...)...)
			if code != 0 || stderr != "" || !strings.HasPrefix(stdout, tt.want+"\n") {
				t.Fatalf("exit %d, stderr %q, stdout:\n%s\nwant exit 0, no stderr, stdout starting %q", code, stderr, stdout, tt.want)
			}
		})
	}
	for _, args := range [][]string{{"info", "--help"}, {"help", "cdi", "generate"}, {"install", "docker", "-h"}} {
		_, _, _, err := runMain(append([]string{"wsl-gpu-hook", "--config", missing}, args...)...)
		var admin adminCommand
		if !errors.As(err, &admin) {
			t.Errorf("%q: %v, want it handed to wsl-gpu-ctl", args, err)
		}
	}
	// The help names every command it hands over.
	if !strings.Contains(help, "\n  "+strings.Join(wsl.CtlCommands(), ", ")+"\n") {
		t.Errorf("help does not name wsl-gpu-ctl's commands %q", wsl.CtlCommands())
	}
}

// TestUsageErrors: a command line that cannot run gets exit 2 and one
// line on stderr saying what is wrong and which help to read.
func TestUsageErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"start"}, `wsl-gpu-hook: unknown command "start": see wsl-gpu-hook --help`},
		{[]string{"help", "start"}, `wsl-gpu-hook: unknown command "start": see wsl-gpu-hook --help`},
		{[]string{"--frob", "prestart"}, `wsl-gpu-hook: flag provided but not defined: -frob: see wsl-gpu-hook --help`},
		{[]string{}, `wsl-gpu-hook: no command given: see wsl-gpu-hook --help`},
		{[]string{"prestart", "--frob"}, `wsl-gpu-hook: prestart: takes no arguments: see wsl-gpu-hook prestart --help`},
		{[]string{"version", "x"}, `wsl-gpu-hook: version: takes no arguments: see wsl-gpu-hook version --help`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, stdout, stderr, _ := runMain(append([]string{"wsl-gpu-hook"}, tt.args...)...)
			if code != 2 || stdout != "" || stderr != tt.want+"\n" {
				t.Fatalf("exit %d, stdout %q, stderr %q; want 2, nothing, %q", code, stdout, stderr, tt.want)
			}
		})
	}
}
