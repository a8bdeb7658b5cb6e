package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/cli"
)

// runMain is main without the exit: the status, stdout and stderr.
func runMain(args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), args, &stdout, &stderr)
	return cli.Report(&stdout, &stderr, "wsl-gpu-dra-driver", err), stdout.String(), stderr.String()
}

// TestHelp: --help and -h print the help with every flag on stdout and
// exit 0, reading no configuration (the file named does not exist).
func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}, {"--config", "/nonexistent.toml", "-help"}} {
		code, stdout, stderr := runMain(args...)
		if code != 0 || stderr != "" || !strings.HasPrefix(stdout, "usage: wsl-gpu-dra-driver [flags]\n") || !strings.Contains(stdout, "\n  -config string\n") {
			t.Errorf("%q: exit %d, stderr %q, stdout:\n%s\nwant exit 0, no stderr, the help", args, code, stderr, stdout)
		}
	}
}

// TestUsageErrors: a command line that cannot run gets exit 2 and one
// line on stderr saying what is wrong and to read the help.
func TestUsageErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--frob"}, "flag provided but not defined: -frob"},
		{[]string{"--interval", "soon"}, `invalid value "soon" for flag -interval: parse error`},
		{[]string{"--config"}, "flag needs an argument: -config"},
		{[]string{"serve"}, `unexpected argument "serve"`},
		{[]string{"--node-name", "n", "--memory-step", "lots"}, `--memory-step "lots": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$': write a quantity such as 256Mi or 1Gi`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, stdout, stderr := runMain(tt.args...)
			want := "wsl-gpu-dra-driver: " + tt.want + ": see wsl-gpu-dra-driver --help\n"
			if code != 2 || stdout != "" || stderr != want {
				t.Fatalf("exit %d, stdout %q, stderr %q; want 2, nothing, %q", code, stdout, stderr, want)
			}
		})
	}
}
