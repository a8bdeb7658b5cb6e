package main

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/cli"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/wsl"
)

// runMain is main without the exit: the status, stdout and stderr.
func runMain(args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), append([]string{"wsl-gpu-ctl"}, args...), strings.NewReader(""), &stdout, &stderr)
	code := cli.Report(&stdout, &stderr, "wsl-gpu-ctl", err)
	return code, stdout.String(), stderr.String()
}

// paths are the command table's commands as typed: "info", "cdi",
// "cdi generate".
func paths(cmds []command) []string {
	var out []string
	for _, c := range cmds {
		out = append(out, c.name)
		for _, s := range c.sub {
			out = append(out, c.name+" "+s.name)
		}
	}
	return out
}

// TestHelp: every command of the table, and the program itself, print
// their help on stdout and exit 0 for --help, -h and help COMMAND, and
// read no configuration for it (the file named does not exist).
func TestHelp(t *testing.T) {
	type form struct{ args, cmd []string } // what is typed, whose help it is
	forms := []form{{[]string{"--help"}, nil}, {[]string{"-h"}, nil}, {[]string{"help"}, nil},
		{[]string{"install", "docker", "--help"}, []string{"install"}},
		{[]string{"install", "--dry-run", "cdi", "-h"}, []string{"install"}},
		{[]string{"top", "--once", "help"}, []string{"top"}}}
	for _, p := range paths(commands()) {
		words := strings.Fields(p)
		forms = append(forms, form{append(words[:len(words):len(words)], "--help"), words},
			form{append(words[:len(words):len(words)], "-h"), words},
			form{append([]string{"help"}, words...), words})
	}
	for _, f := range forms {
		t.Run(strings.Join(f.args, " "), func(t *testing.T) {
			code, stdout, stderr := runMain(append([]string{"--config", "testdata/none.toml"}, f.args...)...)
			want := strings.Join(append([]string{"usage: wsl-gpu-ctl"}, f.cmd...), " ") + " "
			if code != 0 || stderr != "" || !strings.HasPrefix(strings.Replace(stdout, "\n", " ", 1), want) {
				t.Fatalf("exit %d, stderr %q, stdout:\n%s\nwant exit 0, no stderr, stdout starting %q", code, stderr, stdout, want)
			}
		})
	}
}

// TestUsageErrors: a command line that cannot run gets exit 2 and one
// line on stderr that says what is wrong and which help to read, and
// nothing on stdout.
func TestUsageErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"inf"}, `wsl-gpu-ctl: unknown command "inf": see wsl-gpu-ctl --help`},
		{[]string{"--verbose", "info"}, `wsl-gpu-ctl: flag provided but not defined: -verbose: see wsl-gpu-ctl --help`},
		{[]string{}, `wsl-gpu-ctl: no command given: see wsl-gpu-ctl --help`},
		{[]string{"help", "inf"}, `wsl-gpu-ctl: unknown command "inf": see wsl-gpu-ctl --help`},
		{[]string{"info", "--frob"}, `wsl-gpu-ctl: info: flag provided but not defined: -frob: see wsl-gpu-ctl info --help`},
		{[]string{"info", "extra"}, `wsl-gpu-ctl: info: unexpected argument "extra": see wsl-gpu-ctl info --help`},
		{[]string{"top", "--interval", "soon"}, `wsl-gpu-ctl: top: invalid value "soon" for flag -interval: parse error: see wsl-gpu-ctl top --help`},
		{[]string{"top", "--interval", "1ms"}, `wsl-gpu-ctl: top: --interval must be at least 10ms: see wsl-gpu-ctl top --help`},
		{[]string{"cdi"}, `wsl-gpu-ctl: cdi: name a verb: generate, keep: see wsl-gpu-ctl cdi --help`},
		{[]string{"cdi", "generate", "--kind", "x.com/gpu"}, `wsl-gpu-ctl: cdi generate: unknown kind "x.com/gpu" (wsl-gpu-hook.dev/gpu, nvidia.com/gpu, amd.com/gpu): see wsl-gpu-ctl cdi generate --help`},
		{[]string{"cdi", "generate", "stray"}, `wsl-gpu-ctl: cdi generate: unexpected argument "stray": see wsl-gpu-ctl cdi generate --help`},
		{[]string{"uninstall", "--dry-run"}, `wsl-gpu-ctl: uninstall: name an engine: docker, podman, containerd, cdi or docker-desktop: see wsl-gpu-ctl uninstall --help`},
		{[]string{"metrics", "--listen"}, `wsl-gpu-ctl: metrics: flag needs an argument: -listen: see wsl-gpu-ctl metrics --help`},
		{[]string{"version", "x"}, `wsl-gpu-ctl: version: unexpected argument "x": see wsl-gpu-ctl version --help`},
		{[]string{"info", "help", "me"}, `wsl-gpu-ctl: info: unexpected argument "help": see wsl-gpu-ctl info --help`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, stdout, stderr := runMain(append([]string{"--config", "testdata/empty.toml"}, tt.args...)...)
			if code != 2 || stdout != "" || stderr != tt.want+"\n" {
				t.Fatalf("exit %d, stdout %q, stderr %q; want 2, nothing, %q", code, stdout, stderr, tt.want)
			}
		})
	}
}

// TestHookHandsOverTheTable: wsl-gpu-hook hands over exactly the commands
// of this table but version (and help), which it answers itself.
func TestHookHandsOverTheTable(t *testing.T) {
	var names []string
	for _, c := range commands() {
		if c.name != "version" {
			names = append(names, c.name)
		}
	}
	if want := wsl.CtlCommands(); !slices.Equal(names, want) {
		t.Errorf("command table %q, wsl.CtlCommands %q", names, want)
	}
}
