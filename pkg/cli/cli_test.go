package cli

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
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
