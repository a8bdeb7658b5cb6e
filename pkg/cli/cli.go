// Package cli holds the conventions the project's commands share: how a
// usage error differs from a failure, and the one line a failure is
// reported in.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// Command is a command line of the project's binaries:
// PROG [--config FILE] NAME ARGS...
type Command struct {
	// ConfigPath is --config's value, "" when not given.
	ConfigPath string
	Name       string
	Args       []string
}

// Parse reads args (argv without the program's name) as a Command. The
// default configuration path is only shown in the flag's help.
func Parse(prog, defaultConfig string, args []string) (Command, error) {
	fs := flag.NewFlagSet(prog, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfgPath := fs.String("config", "", "configuration file (default "+defaultConfig+")")
	if err := fs.Parse(args); err != nil {
		return Command{}, Usagef("%v", err)
	}
	if fs.NArg() == 0 {
		return Command{}, Usagef("no command given")
	}
	return Command{ConfigPath: *cfgPath, Name: fs.Arg(0), Args: fs.Args()[1:]}, nil
}

// UsageError is a command line that cannot be run: the usage text follows
// it and the exit status is 2.
type UsageError struct{ Msg string }

func (u UsageError) Error() string { return u.Msg }

// Usagef makes a UsageError.
func Usagef(format string, a ...any) error { return UsageError{fmt.Sprintf(format, a...)} }

// Report prints err for a command named name and returns the exit status:
// 0 for nil, 2 with the usage text for a UsageError, 1 with one line
// otherwise (runtimes embed a hook's stderr in their own one-line error).
func Report(w io.Writer, name string, err error, usage string) int {
	if err == nil {
		return 0
	}
	var uerr UsageError
	if errors.As(err, &uerr) {
		fmt.Fprintf(w, "%s: %v\n\n%s", name, err, usage)
		return 2
	}
	fmt.Fprintf(w, "%s: %s\n", name, OneLine(err.Error()))
	return 1
}

// OneLine folds a multi-line error (errors.Join) into the single line a
// runtime shows.
func OneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", "; ")), " ")
}
