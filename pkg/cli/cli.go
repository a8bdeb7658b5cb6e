// Package cli holds the conventions the project's commands share: how a
// usage error differs from a failure, and the one line a failure is
// reported in.
package cli

import (
	"errors"
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

// Parse reads args (argv without the program's name) as a Command, with
// the flag package's syntax for its one flag: -config or --config, its
// value as the next argument or after '=', flags ending at the first
// argument that is not one or after "--". It is written out rather than
// a flag.FlagSet because the hook parses its command line on every
// container start, and the flag package's initialisation and maps were a
// measurable part of it. defaultConfig is only for the help text.
func Parse(prog, defaultConfig string, args []string) (Command, error) {
	var c Command
	for len(args) > 0 {
		a := args[0]
		if len(a) < 2 || a[0] != '-' {
			break
		}
		args = args[1:]
		name := a[1:]
		if name[0] == '-' {
			name = name[1:]
			if name == "" { // "--" ends the flags
				break
			}
		}
		if name == "" || name[0] == '-' || name[0] == '=' {
			return Command{}, Usagef("bad flag syntax: %s", a)
		}
		value, hasValue := "", false
		if i := strings.IndexByte(name, '='); i >= 0 {
			name, value, hasValue = name[:i], name[i+1:], true
		}
		switch name {
		case "config":
		case "help", "h":
			return Command{}, Usagef("flag: help requested (%s [--config FILE] COMMAND; --config defaults to %s)", prog, defaultConfig)
		default:
			return Command{}, Usagef("flag provided but not defined: -%s", name)
		}
		if !hasValue {
			if len(args) == 0 {
				return Command{}, Usagef("flag needs an argument: -%s", name)
			}
			value, args = args[0], args[1:]
		}
		c.ConfigPath = value
	}
	if len(args) == 0 {
		return Command{}, Usagef("no command given")
	}
	c.Name, c.Args = args[0], args[1:]
	return c, nil
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
