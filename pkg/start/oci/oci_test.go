package oci

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadState(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		wantErr string
	}{
		{name: "runc", in: `{"ociVersion":"1.0.2","id":"c1","status":"creating","pid":4242,"bundle":"/run/b"}`},
		{name: "crun adds root", in: `{"ociVersion":"1.0.0","id":"c1","status":"created","pid":0,"bundle":"/run/b","root":"/run/crun"}`},
		{name: "empty", in: "", wantErr: "no container state on stdin: run this as an OCI hook (runc passes the state on stdin)"},
		{name: "garbage", in: "{not json", wantErr: "decode container state from stdin: invalid character 'n' looking for beginning of object key string"},
		{name: "relative bundle", in: `{"pid":1,"bundle":"b"}`, wantErr: `container state: bundle "b" is not an absolute path`},
		{name: "no bundle", in: `{"pid":1}`, wantErr: `container state: bundle "" is not an absolute path`},
		{name: "negative pid", in: `{"pid":-1,"bundle":"/b"}`, wantErr: "container state: invalid pid -1"},
		// A 12 MB state (large annotations) is what engines send: accepted.
		{name: "12 MB of annotations", in: `{"pid":1,"bundle":"/b","annotations":{"a":"` + strings.Repeat("a", 12<<20) + `"}}`},
		{name: "too large", in: `{"id":"` + strings.Repeat("a", MaxStateSize) + `"}`, wantErr: "container state on stdin is 68157449 bytes, more than the hook's limit of 65 MiB: the container's annotations are too large; remove the large ones"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadState(strings.NewReader(tt.in))
			if tt.wantErr == "" && err != nil {
				t.Fatal(err)
			}
			if tt.wantErr != "" && (err == nil || err.Error() != tt.wantErr) {
				t.Fatalf("error = %v, want %s", err, tt.wantErr)
			}
		})
	}
}

// TestStateRootPath: crun names the root filesystem in the state, as
// config.json has it; runc names none (package hookroot then takes the
// hook's working directory, and proves either).
func TestStateRootPath(t *testing.T) {
	tests := []struct {
		name, root string
		want       string
		ok         bool
	}{
		{name: "crun, absolute root", root: "/var/lib/c/merged/", want: "/var/lib/c/merged", ok: true},
		{name: "crun, root in the bundle", root: "rootfs/", want: "/run/b/rootfs", ok: true},
		{name: "crun, podman --rootfs /", root: "/", want: "/", ok: true},
		{name: "runc: none"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := State{Root: tt.root}
			st.Bundle = "/run/b"
			if got, ok := st.RootPath(); got != tt.want || ok != tt.ok {
				t.Fatalf("RootPath = %q, %v; want %q, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestSpec(t *testing.T) {
	bundle := t.TempDir()
	cfg := `{"ociVersion":"1.2.0","root":{"path":"rootfs"},"process":{"env":["A=1","NVIDIA_VISIBLE_DEVICES=0","NVIDIA_VISIBLE_DEVICES=all"]},
	"linux":{"resources":{"devices":[{"allow":false,"access":"rwm"},{"allow":true,"type":"c","major":1,"minor":3,"access":"rwm"}]},
	"namespaces":[{"type":"mount"},{"type":"user"}]},"unknownFutureField":{"x":1}}`
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := LoadSpec(bundle)
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := s.RootPath(bundle); r != filepath.Join(bundle, "rootfs") {
		t.Errorf("RootPath = %q", r)
	}
	if v, ok := s.Env("NVIDIA_VISIBLE_DEVICES"); !ok || v != "all" {
		t.Errorf("Env = %q %v, want the last assignment", v, ok)
	}
	if _, ok := s.Env("MISSING"); ok {
		t.Error("Env found an unset variable")
	}
	if n := len(s.DeviceRules()); n != 2 {
		t.Errorf("%d device rules", n)
	}
	if !s.UserNamespace() {
		t.Error("user namespace not seen")
	}
	abs := &Spec{Root: nil}
	if _, err := abs.RootPath(bundle); err == nil {
		t.Error("RootPath without root succeeded")
	}
	if _, err := LoadSpec(t.TempDir()); err == nil || !strings.Contains(err.Error(), "bundle config: open ") {
		t.Errorf("LoadSpec(empty dir) = %v", err)
	}
}

func FuzzReadState(f *testing.F) {
	f.Add(`{"ociVersion":"1.0.2","id":"c1","status":"creating","pid":4242,"bundle":"/run/b","annotations":{"a":"b"}}`)
	f.Add(`{"pid":1e99,"bundle":"/"}`)
	f.Fuzz(func(t *testing.T, s string) {
		st, err := ReadState(strings.NewReader(s))
		if err == nil && (st.Pid < 0 || !filepath.IsAbs(st.Bundle)) {
			t.Fatalf("accepted bad state %+v", st)
		}
	})
}

// FuzzDecodeSpec: whatever config.json holds, the parts the hook reads
// decode or fail, and the accessors never panic.
func FuzzDecodeSpec(f *testing.F) {
	f.Add(`{"root":{"path":"rootfs"},"process":{"env":["A=1","NVIDIA_VISIBLE_DEVICES=all"]},"linux":{"devices":[{"path":"/dev/dxg","type":"c","major":10,"minor":229}],"resources":{"devices":[{"allow":false,"access":"rwm"}]},"namespaces":[{"type":"user"}]}}`)
	f.Add(`{"linux":null,"process":null,"annotations":{"a":"b"}}`)
	f.Add(`{"root":{"path":"/abs"},"process":{"env":["=","X"]}}`)
	f.Fuzz(func(t *testing.T, data string) {
		s, err := decodeSpec([]byte(data))
		if err != nil {
			return
		}
		s.Env("NVIDIA_VISIBLE_DEVICES")
		s.DeviceRules()
		s.HasDevice("/dev/dxg")
		s.UserNamespace()
		if p, err := s.RootPath("/bundle"); err == nil && !filepath.IsAbs(p) {
			t.Fatalf("RootPath %q is not absolute", p)
		}
	})
}

func TestLoadSpecTooLarge(t *testing.T) {
	bundle := t.TempDir()
	path := filepath.Join(bundle, "config.json")
	big := `{"root":{"path":"r"},"annotations":{"a":"` + strings.Repeat("a", MaxSpecSize) + `"}}`
	if err := os.WriteFile(path, []byte(big), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := LoadSpec(bundle)
	want := path + " is 67108908 bytes, more than the hook's limit of 64 MiB: the container's annotations are too large; remove the large ones"
	if err == nil || err.Error() != want {
		t.Fatalf("error = %v, want %s", err, want)
	}
	var tl *TooLargeError
	if !errors.As(err, &tl) || tl.Limit != MaxSpecSize {
		t.Fatalf("error %T is not a *TooLargeError with the spec limit", err)
	}
}
