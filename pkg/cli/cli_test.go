package cli

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestReport(t *testing.T) {
	tests := []struct {
		name     string
		err      error
		want     string
		wantCode int
	}{
		{"nil", nil, "", 0},
		{"usage", Usagef("no command given"), "x: no command given\n\nusage: x\n", 2},
		{"wrapped usage", fmt.Errorf("install: %w", Usagef("name an engine")), "x: install: name an engine\n\nusage: x\n", 2},
		{"failure folded", errors.Join(errors.New("config x: key a: bad"), errors.New("config x: key b: bad")), "x: config x: key a: bad; config x: key b: bad\n", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			if code := Report(&out, "x", tt.err, "usage: x\n"); code != tt.wantCode || out.String() != tt.want {
				t.Fatalf("Report = %d, %q; want %d, %q", code, out.String(), tt.wantCode, tt.want)
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
	}
	for _, tt := range tests {
		got, err := Parse("x", "/etc/x.toml", tt.args)
		var u UsageError
		switch {
		case tt.wantErr != "" && (err == nil || err.Error() != tt.wantErr || !errors.As(err, &u)):
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
		got, gotErr := Parse("x", "/etc/x.toml", args)
		want, wantErr := oracle(args)
		if (gotErr == nil) != (wantErr == nil) || (gotErr != nil && gotErr.Error() != wantErr.Error()) {
			t.Errorf("Parse(%q) error %v, flag's %v", args, gotErr, wantErr)
			continue
		}
		if gotErr == nil && (got.ConfigPath != want.ConfigPath || got.Name != want.Name || !slices.Equal(got.Args, want.Args)) {
			t.Errorf("Parse(%q) = %+v, flag's %+v", args, got, want)
		}
	}
	if _, err := Parse("x", "/etc/x.toml", []string{"-h"}); err == nil || !strings.Contains(err.Error(), "help requested") {
		t.Errorf("Parse(-h) = %v, want help requested", err)
	}
}
