package cli

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"reflect"
	"slices"
	"testing"
	"time"
)

func TestReport(t *testing.T) {
	tests := []struct {
		name             string
		err              error
		wantOut, wantErr string
		wantCode         int
	}{
		{"nil", nil, "", "", 0},
		{"help on stdout", Help{"usage: x\n"}, "usage: x\n", "", 0},
		{"usage", Usagef("no command given"), "", "x: no command given: see x --help\n", 2},
		{"a command's usage names its help", CmdUsagef("cdi generate", "unexpected argument %q", "a"), "", "x: cdi generate: unexpected argument \"a\": see x cdi generate --help\n", 2},
		{"wrapped usage", fmt.Errorf("install: %w", Usagef("name an engine")), "", "x: install: name an engine: see x --help\n", 2},
		{"failure folded", errors.Join(errors.New("config x: key a: bad"), errors.New("config x: key b: bad")), "", "x: config x: key a: bad; config x: key b: bad\n", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := Report(&stdout, &stderr, "x", tt.err)
			if code != tt.wantCode || stdout.String() != tt.wantOut || stderr.String() != tt.wantErr {
				t.Fatalf("Report = %d, stdout %q, stderr %q; want %d, %q, %q", code, stdout.String(), stderr.String(), tt.wantCode, tt.wantOut, tt.wantErr)
			}
		})
	}
}

func TestParse(t *testing.T) {
	tests := []struct {
		args    []string
		want    Command
		wantErr string
	}{
		{args: []string{"info", "--json"}, want: Command{Name: "info", Args: []string{"--json"}}},
		{args: []string{"--config", "/c.toml", "prestart"}, want: Command{ConfigPath: "/c.toml", Name: "prestart", Args: []string{}}},
		{args: []string{"--config=/c.toml", "cdi", "generate", "--config", "x"}, want: Command{ConfigPath: "/c.toml", Name: "cdi", Args: []string{"generate", "--config", "x"}}},
		{args: nil, wantErr: "no command given"},
		{args: []string{"--config"}, wantErr: "flag needs an argument: -config"},
		{args: []string{"--verbose", "info"}, wantErr: "flag provided but not defined: -verbose"},
		{args: []string{"--config", "/c.toml", "--help", "info"}, wantErr: "help requested"},
		{args: []string{"-h"}, wantErr: "help requested"},
		{args: []string{"help"}, wantErr: "help requested"},
		{args: []string{"help", "cdi", "generate"}, want: Command{Name: "cdi", Args: []string{"generate", "--help"}}},
		{args: []string{"--config", "/c.toml", "help", "info"}, want: Command{ConfigPath: "/c.toml", Name: "info", Args: []string{"--help"}}},
	}
	for _, tt := range tests {
		got, err := Parse("usage: x\n", tt.args)
		var u UsageError
		var h Help
		switch {
		case tt.wantErr == "help requested" && (!errors.As(err, &h) || h.Text != "usage: x\n"):
			t.Errorf("Parse(%q) error = %v, want Help with the text", tt.args, err)
		case tt.wantErr != "" && tt.wantErr != "help requested" && (err == nil || err.Error() != tt.wantErr || !errors.As(err, &u)):
			t.Errorf("Parse(%q) error = %v, want usage error %q", tt.args, err, tt.wantErr)
		case tt.wantErr == "" && (err != nil || !reflect.DeepEqual(got, tt.want)):
			t.Errorf("Parse(%q) = %+v, %v; want %+v", tt.args, got, err, tt.want)
		}
	}
}

// TestParseAgreesWithFlag holds Parse to the flag package's reading of the
// same command lines (the oracle it replaced on the hook's path).
func TestParseAgreesWithFlag(t *testing.T) {
	oracle := func(args []string) (Command, error) {
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		cfg := fs.String("config", "", "")
		if err := fs.Parse(args); err != nil {
			return Command{}, err
		}
		if fs.NArg() == 0 {
			return Command{}, errors.New("no command given")
		}
		return Command{ConfigPath: *cfg, Name: fs.Arg(0), Args: fs.Args()[1:]}, nil
	}
	for _, args := range [][]string{
		{"prestart"},
		{"-config", "/a", "prestart"},
		{"--config", "/a", "createRuntime"},
		{"-config=/a", "cdi-hook", "vendor:nvidia"},
		{"--config=/a=b", "cdi-hook"},
		{"--config=", "prestart"},
		{"--config", "/a", "--config", "/b", "prestart"},
		{"--config", "--x", "prestart"},
		{"--", "--config", "/a"},
		{"--config", "/a", "--"},
		{"-", "x"},
		{"---config", "/a", "x"},
		{"-=a", "x"},
		{"--=a", "x"},
		{"-x", "prestart"},
		{"--x=1", "prestart"},
		{"-config"},
		{"--config"},
		{},
		{"prestart", "--config", "/a"},
		{"cdi-hook", "--", "a"},
	} {
		got, gotErr := Parse("usage: x\n", args)
		want, wantErr := oracle(args)
		if (gotErr == nil) != (wantErr == nil) || (gotErr != nil && gotErr.Error() != wantErr.Error()) {
			t.Errorf("Parse(%q) error %v, flag's %v", args, gotErr, wantErr)
			continue
		}
		if gotErr == nil && (got.ConfigPath != want.ConfigPath || got.Name != want.Name || !slices.Equal(got.Args, want.Args)) {
			t.Errorf("Parse(%q) = %+v, flag's %+v", args, got, want)
		}
	}
}

func TestParseFlags(t *testing.T) {
	doc := Doc{Prog: "x", Cmd: "top", Args: "[--once]", Summary: "Show the GPUs.", More: "See also x info."}
	const help = "usage: x top [--once]\n\nShow the GPUs.\n\nflags:\n  -interval duration\n    \tbetween samples (default 1s)\n  -once\n    \tone view\n\nSee also x info.\n"
	tests := []struct {
		name     string
		args     []string
		wantHelp string
		wantErr  string // a UsageError's text
		wantArgs []string
	}{
		{name: "ok", args: []string{"--once", "a"}, wantArgs: []string{"a"}},
		{name: "-h", args: []string{"-h"}, wantHelp: help},
		{name: "--help after a flag", args: []string{"--once", "--help"}, wantHelp: help},
		{name: "-help=x", args: []string{"-help=x"}, wantHelp: help},
		{name: "help after the flags is an argument", args: []string{"a", "--help"}, wantArgs: []string{"a", "--help"}},
		{name: "unknown flag", args: []string{"--nope"}, wantErr: "top: flag provided but not defined: -nope"},
		{name: "bad value", args: []string{"--interval", "soon"}, wantErr: `top: invalid value "soon" for flag -interval: parse error`},
		{name: "missing value", args: []string{"--interval"}, wantErr: "top: flag needs an argument: -interval"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := flag.NewFlagSet("top", flag.ContinueOnError)
			var stray bytes.Buffer
			fs.SetOutput(&stray) // ParseFlags must print nothing itself
			fs.Duration("interval", time.Second, "between samples")
			fs.Bool("once", false, "one view")
			err := ParseFlags(fs, tt.args, doc)
			var h Help
			var u UsageError
			switch {
			case tt.wantHelp != "":
				if !errors.As(err, &h) || h.Text != tt.wantHelp {
					t.Fatalf("ParseFlags = %v, want help:\n%s\ngot:\n%s", err, tt.wantHelp, h.Text)
				}
			case tt.wantErr != "":
				if !errors.As(err, &u) || err.Error() != tt.wantErr || u.Cmd != "top" {
					t.Fatalf("ParseFlags = %#v, want usage error %q for top", err, tt.wantErr)
				}
			case err != nil || !slices.Equal(fs.Args(), tt.wantArgs):
				t.Fatalf("ParseFlags = %v, args %q; want nil, %q", err, fs.Args(), tt.wantArgs)
			}
			if stray.Len() > 0 {
				t.Fatalf("ParseFlags printed %q", stray.String())
			}
		})
	}
}

func TestDocText(t *testing.T) {
	tests := []struct {
		name string
		doc  Doc
		fs   bool
		want string
	}{
		{"program, no flags", Doc{Prog: "x", Args: "COMMAND", Summary: "Do things.\n"}, false, "usage: x COMMAND\n\nDo things.\n"},
		{"a flag set without flags", Doc{Prog: "x", Cmd: "version"}, true, "usage: x version\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var fs FlagSet
			if tt.fs {
				fs = flag.NewFlagSet("v", flag.ContinueOnError)
			}
			if got := tt.doc.Text(fs); got != tt.want {
				t.Fatalf("Text = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestIsHelpArg(t *testing.T) {
	for a, want := range map[string]bool{"-h": true, "--h": true, "-help": true, "--help": true, "help": false, "---help": false, "-hh": false, "": false} {
		if IsHelpArg(a) != want {
			t.Errorf("IsHelpArg(%q) = %v", a, !want)
		}
	}
}

func TestNoArgs(t *testing.T) {
	doc := Doc{Prog: "x", Cmd: "info"}
	tests := []struct {
		args     []string
		wantHelp bool
		wantErr  string
	}{
		{args: nil},
		{args: []string{"help"}, wantHelp: true},
		{args: []string{"help", "me"}, wantErr: `info: unexpected argument "help"`},
		{args: []string{"a"}, wantErr: `info: unexpected argument "a"`},
	}
	for _, tt := range tests {
		err := NoArgs(tt.args, flag.NewFlagSet("info", flag.ContinueOnError), doc)
		var h Help
		var u UsageError
		switch {
		case tt.wantHelp && (!errors.As(err, &h) || h.Text != "usage: x info\n"):
			t.Errorf("NoArgs(%q) = %v, want the help", tt.args, err)
		case tt.wantErr != "" && (!errors.As(err, &u) || err.Error() != tt.wantErr):
			t.Errorf("NoArgs(%q) = %v, want usage error %q", tt.args, err, tt.wantErr)
		case !tt.wantHelp && tt.wantErr == "" && err != nil:
			t.Errorf("NoArgs(%q) = %v", tt.args, err)
		}
	}
}
