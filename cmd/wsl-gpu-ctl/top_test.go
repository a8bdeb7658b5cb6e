package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/gpustats"
)

// controlBytes lists what in out a terminal would act on: every C0 byte
// but newline, DEL, C1 characters, and bytes that are not UTF-8.
func controlBytes(out string) []string {
	var bad []string
	for i, r := range out {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(out[i:], "\ufffd"):
			bad = append(bad, "invalid byte")
		case r < 0x20 && r != '\n', r == 0x7f, r >= 0x80 && r < 0xa0:
			bad = append(bad, string(r))
		}
	}
	return bad
}

// TestTopPrintsNoControlBytes: a process name, an engine name or an
// adapter description is printed to a person's terminal; any process that
// holds /dev/dxg chooses its own name, so none may carry escape sequences
// or bytes that are not text.
func TestTopPrintsNoControlBytes(t *testing.T) {
	const hostile = "\xff\x1b]0;owned\x07\x1b[2J\x9b\r"
	busy := 0.5
	s := gpustats.Sample{Time: time.Unix(0, 0), Adapters: []gpustats.Adapter{
		{Index: 0, Vendor: "nvidia", Description: "RTX" + hostile, Local: gpustats.Memory{Total: 1 << 30},
			Engines:   []gpustats.Engine{{Name: "3D" + hostile, Kind: "3d", Busy: &busy, Error: "counter" + hostile}},
			Processes: []gpustats.ProcessUse{{Process: gpustats.Process{PID: 7, Comm: hostile}, Local: 1 << 20}},
			Notes:     []string{"pid 8 (" + hostile + "): not attributable"}},
		{Index: 1, Vendor: "intel", Description: hostile, Error: "adapter statistics: " + hostile},
	}}
	var out bytes.Buffer
	printTop(&out, s, time.Second)
	if bad := controlBytes(out.String()); len(bad) > 0 {
		t.Errorf("top printed %q in\n%s", bad, out.String())
	}
	if !strings.Contains(out.String(), `\x1b]0;owned\x07`) {
		t.Errorf("the escape sequence is not shown escaped:\n%s", out.String())
	}
}
