package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/usage/gpustats"
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
			Engines:      []gpustats.Engine{{Name: "3D" + hostile, Kind: "3d", Busy: &busy, Error: "counter" + hostile}},
			Processes:    []gpustats.ProcessUse{{Process: gpustats.Process{PID: 7, Comm: hostile}, Local: 1 << 20}},
			Notes:        []string{"processes: " + hostile},
			Unattributed: []gpustats.Unattributed{{PID: 8, Comm: hostile, Reason: gpustats.ReasonAmbiguous}}},
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

// TestTopView: what a person reads. An unknown budget is "-", not 0;
// containers and pods by name where known; the processes that cannot be
// counted in one line, however many adapters and processes.
func TestTopView(t *testing.T) {
	s := gpustats.Sample{Time: time.Unix(0, 0), Adapters: []gpustats.Adapter{
		{Index: 0, Vendor: "intel", Description: "Iris", NonLocal: gpustats.Memory{Total: 8 << 30}, Budget: 0,
			Unattributed: []gpustats.Unattributed{{PID: 1, Reason: gpustats.ReasonAmbiguous}, {PID: 2, Reason: gpustats.ReasonNotFound}}},
		{Index: 1, Vendor: "nvidia", Description: "RTX", Local: gpustats.Memory{Total: 6 << 30}, Budget: 5 << 30,
			Processes: []gpustats.ProcessUse{
				{Process: gpustats.Process{PID: 7, Comm: "python", Container: "0123456789ab", Pod: "u-1", Namespace: "ml", PodName: "trainer-0", ContainerName: "main"}, Local: 1 << 30},
				{Process: gpustats.Process{PID: 9, Comm: "bash", Container: "fedcba987654"}, Local: 1 << 20},
			},
			Unattributed: []gpustats.Unattributed{{PID: 1, Reason: gpustats.ReasonAmbiguous}, {PID: 2, Reason: gpustats.ReasonNotFound}, {PID: 3, Reason: gpustats.ReasonNotFound}}},
	}}
	var out bytes.Buffer
	printTop(&out, s, time.Second)
	got := out.String()
	if !regexp.MustCompile(`8 GiB shared +- `).MatchString(got) {
		t.Errorf("the unknown budget is not shown as -:\n%s", got)
	}
	for _, want := range []string{
		"python   main          ml/trainer-0",
		"bash     fedcba987654  -",
		"note: 3 GPU processes not counted: 2 the WSL kernel cannot attribute (another pid namespace, or a kernel without the pid lookup), 1 sharing their namespace pid with another (every container's pid 1) (--json lists them)\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("top lacks %q:\n%s", want, got)
		}
	}
	if n := strings.Count(got, "note:"); n != 1 {
		t.Errorf("%d note lines, want one:\n%s", n, got)
	}
}
