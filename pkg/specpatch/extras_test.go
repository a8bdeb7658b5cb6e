package specpatch

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/devnode"
)

var extras = Extras{
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
			out, kept, err := AddExtras([]byte(tt.in), extras)
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
			again, _, err := AddExtras(out, extras)
			if err != nil || !bytes.Equal(again, out) {
				t.Errorf("second AddExtras changed the config:\n%s\n%s", out, again)
			}
		})
	}
}

func TestAddExtrasKeepsUnknownFields(t *testing.T) {
	out, _, err := AddExtras([]byte(dockerLike), extras)
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
		if _, _, err := AddExtras([]byte(in), extras); err == nil {
			t.Errorf("AddExtras(%q) succeeded", in)
		}
	}
}
