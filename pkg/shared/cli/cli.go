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
// measurable part of it.
//
// -h, --help and a bare "help" return Help{help}; "help NAME ARGS..."
// reads as "NAME ARGS... --help", so that each command answers its own
// help in one place.
func Parse(help string, args []string) (Command, error) {
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
			return Command{}, Help{help}
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
	if c.Name == "help" {
		if len(c.Args) == 0 {
			return Command{}, Help{help}
		}
		c.Name, c.Args = c.Args[0], append(c.Args[1:len(c.Args):len(c.Args)], "--help")
	}
	return c, nil
}

// IsHelpArg says whether a is one of the words that ask a command for its
// help: -h, --h, -help, --help (the flag package's).
func IsHelpArg(a string) bool {
	switch a {
	case "-h", "--h", "-help", "--help":
		return true
	}
	return false
}

// Help is a command line that asks for help: Report prints Text on
// stdout and exits 0.
type Help struct{ Text string }

func (Help) Error() string { return "help requested" }

// UsageError is a command line that cannot be run (exit status 2).
type UsageError struct {
	// Cmd is the command it was for, as typed after the program's name
	// ("info", "cdi generate"); "" for the program itself. Its help is
	// the one Report points at.
	Cmd string
	Msg string
}

func (u UsageError) Error() string {
	if u.Cmd == "" {
		return u.Msg
	}
	return u.Cmd + ": " + u.Msg
}

// Usagef makes a UsageError about the command line as a whole.
func Usagef(format string, a ...any) error { return UsageError{Msg: fmt.Sprintf(format, a...)} }

// CmdUsagef makes a UsageError about command cmd's arguments.
func CmdUsagef(cmd, format string, a ...any) error {
	return UsageError{Cmd: cmd, Msg: fmt.Sprintf(format, a...)}
}

// Report prints err for the program named prog and returns the exit
// status: 0 for nil; 0 with the text on stdout for Help; 2 with one line
// naming the help to read for a UsageError; 1 with one line otherwise
// (runtimes embed a hook's stderr in their own one-line error).
func Report(stdout, stderr io.Writer, prog string, err error) int {
	var help Help
	var uerr UsageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &help):
		fmt.Fprint(stdout, help.Text)
		return 0
	case errors.As(err, &uerr):
		see := prog
		if uerr.Cmd != "" {
			see += " " + uerr.Cmd
		}
		fmt.Fprintf(stderr, "%s: %s: see %s --help\n", prog, OneLine(err.Error()), see)
		return 2
	}
	fmt.Fprintf(stderr, "%s: %s\n", prog, OneLine(err.Error()))
	return 1
}

// OneLine folds a multi-line error (errors.Join) into the single line a
// runtime shows.
func OneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", "; ")), " ")
}
