package specpatch

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/devnode"
)

const dockerLike = `{"ociVersion":"1.0.2","process":{"env":["NVIDIA_VISIBLE_DEVICES=all"],"futureProcessField":7},
"root":{"path":"/var/lib/docker/x/merged"},"hooks":{"prestart":[{"path":"/usr/bin/other","args":["other"]}]},
"linux":{"devices":[{"path":"/dev/fuse","type":"c","major":10,"minor":229}],
"resources":{"devices":[{"allow":false,"access":"rwm"},{"allow":true,"type":"c","major":1,"minor":3,"access":"rwm"}],"memory":{"limit":1073741824}},
"seccomp":{"defaultAction":"SCMP_ACT_ERRNO"},"intelRdt":{"closID":"x"}},"x-vendor":{"keep":[1,2,3]}}`

var dxg = devnode.Node{Path: "/dev/dxg", Major: 10, Minor: 53}
var hook = specs.Hook{Path: "/usr/local/bin/wsl-gpu-hook", Args: []string{"wsl-gpu-hook", "prestart"}}

func TestAddGPU(t *testing.T) {
	tests := []struct{ name, in string }{
		{"docker-like config", dockerLike},
		{"minimal config", `{"ociVersion":"1.0.2","root":{"path":"rootfs"}}`},
		{"null sections", `{"linux":null,"hooks":null}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := AddGPU([]byte(tt.in), "/dev/dxg", dxg, hook)
			if err != nil {
				t.Fatal(err)
			}
			var s specs.Spec
			if err := json.Unmarshal(out, &s); err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, d := range s.Linux.Devices {
				if d.Path == "/dev/dxg" {
					n++
					if d.Type != "c" || d.Major != 10 || d.Minor != 53 || d.FileMode == nil || *d.FileMode != 0o666 {
						t.Errorf("device = %+v", d)
					}
				}
			}
			if n != 1 {
				t.Errorf("%d /dev/dxg devices", n)
			}
			rules := s.Linux.Resources.Devices
			last := rules[len(rules)-1]
			if !last.Allow || last.Type != "c" || *last.Major != 10 || *last.Minor != 53 || last.Access != "rwm" {
				t.Errorf("last rule = %+v, want the dxg allow rule after the runtime's deny-all", last)
			}
			if h := s.Hooks.Prestart; h[len(h)-1].Path != hook.Path {
				t.Errorf("prestart = %+v", h)
			}
			// Idempotent: a second pass (a restarted container) adds nothing.
			again, err := AddGPU(out, "/dev/dxg", dxg, hook)
			if err != nil || !bytes.Equal(again, out) {
				t.Errorf("second AddGPU changed the config:\n%s\n%s", out, again)
			}
		})
	}
}

func TestAddGPUKeepsUnknownFields(t *testing.T) {
	out, err := AddGPU([]byte(dockerLike), "/dev/dxg", dxg, hook)
	if err != nil {
		t.Fatal(err)
	}
	for _, keep := range []string{`"futureProcessField":7`, `"x-vendor":{"keep":[1,2,3]}`, `"intelRdt":{"closID":"x"}`,
		`"memory":{"limit":1073741824}`, `"seccomp":{"defaultAction":"SCMP_ACT_ERRNO"}`, `"path":"/usr/bin/other"`} {
		if !strings.Contains(string(out), keep) {
			t.Errorf("lost %s", keep)
		}
	}
}

func TestAddGPUBadInput(t *testing.T) {
	for _, in := range []string{``, `[]`, `null`, `{"linux":[]}`, `{"hooks":{"prestart":{}}}`} {
		if _, err := AddGPU([]byte(in), "/dev/dxg", dxg, hook); err == nil {
			t.Errorf("AddGPU(%q) succeeded", in)
		}
	}
}
