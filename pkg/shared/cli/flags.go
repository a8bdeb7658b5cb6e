package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"
)

// FlagSet is the part of a *flag.FlagSet ParseFlags uses. It is an
// interface only so that this package does not import flag, which the
// hook must not link.
type FlagSet interface {
	Parse(args []string) error
	SetOutput(w io.Writer)
	PrintDefaults()
}

// Doc is what a command's help says.
type Doc struct {
	// Prog is the program as typed ("wsl-gpu-ctl"), Cmd the command's
	// words after it ("cdi generate"; "" for the program itself) and Args
	// the rest of its usage line ("[--json] [--k8s]").
	Prog, Cmd, Args string
	// Summary says what the command does, in a line or two.
	Summary string
	// More follows the flags: the commands, the accepted words.
	More string
}

// Text is the help: usage line, summary, the flags fs defines (none
// without fs), More.
func (d Doc) Text(fs FlagSet) string {
	var b strings.Builder
	b.WriteString("usage: " + strings.Join(nonEmpty(d.Prog, d.Cmd, d.Args), " ") + "\n")
	if d.Summary != "" {
		b.WriteString("\n" + strings.TrimRight(d.Summary, "\n") + "\n")
	}
	if fs != nil {
		var flags strings.Builder
		fs.SetOutput(&flags)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
		if flags.Len() > 0 {
			b.WriteString("\nflags:\n" + flags.String())
		}
	}
	if d.More != "" {
		b.WriteString("\n" + strings.TrimRight(d.More, "\n") + "\n")
	}
	return b.String()
}

func nonEmpty(s ...string) []string {
	var out []string
	for _, w := range s {
		if w != "" {
			out = append(out, w)
		}
	}
	return out
}

// ParseFlags parses args with fs, which must be made with
// flag.ContinueOnError and define neither -h nor -help. It returns nil,
// Help{d.Text(fs)} for -h or --help (the help goes to stdout, not the
// usage dump flag prints on stderr), or a UsageError for d.Cmd with the
// flag package's one-line reason for a flag or value it cannot read.
// Nothing is printed: Report does that.
func ParseFlags(fs FlagSet, args []string, d Doc) error {
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, errHelp(fs)):
		return Help{d.Text(fs)}
	}
	return UsageError{Cmd: d.Cmd, Msg: err.Error()}
}

// errHelp is the flag package's ErrHelp, which it returns for -h and
// -help when the set defines neither: asked of fs rather than imported
// (see FlagSet). Called only after a failed parse, whose flag values
// are not used.
func errHelp(fs FlagSet) error {
	return fs.Parse([]string{"-h"})
}

// NoArgs checks what is left after the flags of a command that takes no
// arguments: a lone "help" asks for its help (Help{d.Text(fs)}), anything
// else is a UsageError naming the first.
func NoArgs(args []string, fs FlagSet, d Doc) error {
	switch {
	case len(args) == 0:
		return nil
	case len(args) == 1 && args[0] == "help":
		return Help{d.Text(fs)}
	}
	return UsageError{Cmd: d.Cmd, Msg: fmt.Sprintf("unexpected argument %q", args[0])}
}
