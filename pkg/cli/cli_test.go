package cli

import (
	"bytes"
	"errors"
	"fmt"
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
