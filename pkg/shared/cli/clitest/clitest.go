// Package clitest holds the checks every binary's command line answers to
// (package cli's three outcomes), for the tests of the daemons' mains,
// which parse with a flag.FlagSet and have no command table of their own.
package clitest

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/cli"
)

// Run is a main without the exit: what it does with args.
type Run func(ctx context.Context, args []string, stdout, stderr io.Writer) error

func runMain(prog string, run Run, args []string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), args, &stdout, &stderr)
	return cli.Report(&stdout, &stderr, prog, err), stdout.String(), stderr.String()
}

// Help checks that --help, -h, help and -help after --config print prog's
// help, with its --config flag, on stdout and exit 0, reading no
// configuration (the file named does not exist).
func Help(t *testing.T, prog string, run Run) {
	t.Helper()
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}, {"--config", "/nonexistent.toml", "-help"}} {
		code, stdout, stderr := runMain(prog, run, args)
		if code != 0 || stderr != "" || !strings.HasPrefix(stdout, "usage: "+prog+" [flags]\n") || !strings.Contains(stdout, "\n  -config string\n") {
			t.Errorf("%q: exit %d, stderr %q, stdout:\n%s\nwant exit 0, no stderr, the help", args, code, stderr, stdout)
		}
	}
}

// UsageError is a command line that cannot run and the one line that
// says why, before ": see PROG --help".
type UsageError struct {
	Args []string
	Want string
}

// UsageErrors checks that each command line gets exit 2, nothing on
// stdout and exactly "PROG: WANT: see PROG --help" on stderr.
func UsageErrors(t *testing.T, prog string, run Run, tests []UsageError) {
	t.Helper()
	for _, tt := range tests {
		t.Run(strings.Join(tt.Args, " "), func(t *testing.T) {
			code, stdout, stderr := runMain(prog, run, tt.Args)
			want := prog + ": " + tt.Want + ": see " + prog + " --help\n"
			if code != 2 || stdout != "" || stderr != want {
				t.Fatalf("exit %d, stdout %q, stderr %q; want 2, nothing, %q", code, stdout, stderr, want)
			}
		})
	}
}
