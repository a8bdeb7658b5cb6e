package main

import (
	"testing"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/cli/clitest"
)

// TestHelp: --help and -h print the help with every flag on stdout and
// exit 0, reading no configuration.
func TestHelp(t *testing.T) { clitest.Help(t, "wsl-gpu-device-plugin", run) }

// TestUsageErrors: a command line that cannot run gets exit 2 and one
// line on stderr saying what is wrong and to read the help.
func TestUsageErrors(t *testing.T) {
	clitest.UsageErrors(t, "wsl-gpu-device-plugin", run, []clitest.UsageError{
		{Args: []string{"--frob"}, Want: "flag provided but not defined: -frob"},
		{Args: []string{"--interval", "soon"}, Want: `invalid value "soon" for flag -interval: parse error`},
		{Args: []string{"--config"}, Want: "flag needs an argument: -config"},
		{Args: []string{"serve"}, Want: `unexpected argument "serve"`},
		{Args: []string{"--metrics-interval", "1ms"}, Want: "--metrics-interval must be at least 1s: sampling more often only costs the Windows host"},
		{Args: []string{"--setup-only"}, Want: "--setup-only needs --node-root"},
	})
}
