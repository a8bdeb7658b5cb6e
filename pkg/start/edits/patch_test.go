package edits

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/devnode"
)

// The wrapper's two patches as they were (specpatch.AddGPU, AddExtras),
// now one Edits value each through Patch: the tests below are specpatch's,
// moved here with the same assertions.

func addGPU(config []byte, path string, node devnode.Node, hook specs.Hook) ([]byte, error) {
	e := Edits{Node: Device{Path: path, Node: node, Access: AccessDxg}, Hooks: []Hook{{Stage: "prestart", Path: hook.Path, Args: hook.Args}}}
	out, _, err := e.Patch(config)
	return out, err
}

type extrasT struct {
	Devices []Device
	Mounts  []specs.Mount
	Env     []string
}

func addExtras(config []byte, x extrasT) ([]byte, []string, error) {
	e := Edits{Env: x.Env}
	for _, d := range x.Devices {
		d.Access = AccessStack
		e.Devices = append(e.Devices, d)
	}
	for _, m := range x.Mounts {
		e.Mounts = append(e.Mounts, Mount{Source: m.Source, Target: m.Destination})
	}
	return e.Patch(config)
}

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
			out, err := addGPU([]byte(tt.in), "/dev/dxg", dxg, hook)
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
			again, err := addGPU(out, "/dev/dxg", dxg, hook)
			if err != nil || !bytes.Equal(again, out) {
				t.Errorf("second AddGPU changed the config:\n%s\n%s", out, again)
			}
		})
	}
}

func TestAddGPUKeepsUnknownFields(t *testing.T) {
	out, err := addGPU([]byte(dockerLike), "/dev/dxg", dxg, hook)
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
		if _, err := addGPU([]byte(in), "/dev/dxg", dxg, hook); err == nil {
			t.Errorf("addGPU(%q) succeeded", in)
		}
	}
}

var extras = extrasT{
	Devices: []Device{{Path: "/dev/dri/card0", Node: devnode.Node{Path: "/dev/dri/card0", Major: 226, Minor: 0}},
		{Path: "/dev/dri/renderD128", Node: devnode.Node{Path: "/dev/dri/renderD128", Major: 226, Minor: 128}}},
	Mounts: []specs.Mount{{Destination: "/usr/lib/librocdxg.so.1", Source: "/opt/rocm/lib/librocdxg.so.1", Type: "bind",
		Options: []string{"rbind", "ro", "nosuid", "nodev"}}},
	Env: []string{"HSA_ENABLE_DXG_DETECTION=1", "DISPLAY=:0"},
}

func TestAddExtras(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		wantEnv  []string
		wantKept []string
	}{
		{"docker-like config", dockerLike, []string{"NVIDIA_VISIBLE_DEVICES=all", "HSA_ENABLE_DXG_DETECTION=1", "DISPLAY=:0"}, nil},
		{"minimal config", `{"ociVersion":"1.0.2","root":{"path":"rootfs"}}`, []string{"HSA_ENABLE_DXG_DETECTION=1", "DISPLAY=:0"}, nil},
		{"null sections", `{"linux":null,"process":null,"mounts":null}`, []string{"HSA_ENABLE_DXG_DETECTION=1", "DISPLAY=:0"}, nil},
		{"the user's DISPLAY wins", `{"process":{"env":["DISPLAY=:3"]}}`, []string{"DISPLAY=:3", "HSA_ENABLE_DXG_DETECTION=1"}, []string{"DISPLAY=:0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, kept, err := addExtras([]byte(tt.in), extras)
			if err != nil {
				t.Fatal(err)
			}
			var s specs.Spec
			if err := json.Unmarshal(out, &s); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(s.Process.Env, tt.wantEnv) || !reflect.DeepEqual(kept, tt.wantKept) {
				t.Errorf("env = %q kept %q, want %q kept %q", s.Process.Env, kept, tt.wantEnv, tt.wantKept)
			}
			var paths []string
			for _, d := range s.Linux.Devices {
				if strings.HasPrefix(d.Path, "/dev/dri/") {
					paths = append(paths, d.Path)
					if d.Type != "c" || d.FileMode == nil || *d.FileMode != 0o666 {
						t.Errorf("device %+v", d)
					}
				}
			}
			if !reflect.DeepEqual(paths, []string{"/dev/dri/card0", "/dev/dri/renderD128"}) {
				t.Errorf("devices %q", paths)
			}
			rules := s.Linux.Resources.Devices
			for i, want := range []int64{0, 128} {
				r := rules[len(rules)-2+i]
				if !r.Allow || r.Type != "c" || *r.Major != 226 || *r.Minor != want || r.Access != "rw" {
					t.Errorf("rule %+v, want allow c 226:%d rw after the runtime's rules", r, want)
				}
			}
			if m := s.Mounts[len(s.Mounts)-1]; m.Destination != "/usr/lib/librocdxg.so.1" || m.Source != "/opt/rocm/lib/librocdxg.so.1" {
				t.Errorf("mounts %+v", s.Mounts)
			}
			again, _, err := addExtras(out, extras)
			if err != nil || !bytes.Equal(again, out) {
				t.Errorf("second AddExtras changed the config:\n%s\n%s", out, again)
			}
		})
	}
}

func TestAddExtrasKeepsUnknownFields(t *testing.T) {
	out, _, err := addExtras([]byte(dockerLike), extras)
	if err != nil {
		t.Fatal(err)
	}
	for _, keep := range []string{`"futureProcessField":7`, `"x-vendor":{"keep":[1,2,3]}`, `"intelRdt":{"closID":"x"}`,
		`"memory":{"limit":1073741824}`, `"path":"/dev/fuse"`} {
		if !strings.Contains(string(out), keep) {
			t.Errorf("lost %s", keep)
		}
	}
}

func TestAddExtrasBadInput(t *testing.T) {
	for _, in := range []string{``, `[]`, `null`, `{"linux":[]}`, `{"process":{"env":{}}}`, `{"mounts":{}}`} {
		if _, _, err := addExtras([]byte(in), extras); err == nil {
			t.Errorf("addExtras(%q) succeeded", in)
		}
	}
}
