package dra

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/driverstore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/dxcore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/setup/cdispec"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/cdiselect"
)

const (
	uid1 = "6f1c2d9e-0b7a-4c43-9d7e-2a1b3c4d5e6f"
	uid2 = "0a0b0c0d-0000-4000-8000-000000000001"
)

func samplePrepared(uid string) Prepared {
	p := Prepared{Namespace: "default", Name: "gpu", SpecFile: SpecFile(uid), Devices: []PreparedDevice{{
		Request: "gpu", Pool: "node-a", Device: "nvidia-2520-3a5c17aa-0", LUID: "0x4486d1",
		CDIDevice: CDIDevice(uid, "nvidia-2520-3a5c17aa-0"),
	}}}
	spec, err := cdispec.Transient(CDIKind, []cdispec.Named{{Name: uid + "-" + p.Devices[0].Device,
		Selection: cdiselect.Selection{LUID: dxcore.LUID{Low: 0x4486d1}, Index: -1}}}, &driverstore.Inventory{}, specOpt)
	if err != nil {
		panic(err)
	}
	p.Spec = spec
	return p
}

func TestCheckpointRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "checkpoint.json")
	cp, err := LoadCheckpoint(path)
	if err != nil || len(cp.Claims) != 0 {
		t.Fatalf("LoadCheckpoint(missing) = %+v, %v; want empty", cp, err)
	}
	cp.Claims[uid1] = samplePrepared(uid1)
	if err := cp.Save(path); err != nil {
		t.Fatal(err)
	}
	got, err := LoadCheckpoint(path)
	if err != nil || !reflect.DeepEqual(got, cp) {
		t.Fatalf("LoadCheckpoint = %+v, %v; want %+v", got, err, cp)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode())
	}
}

// Every file the driver did not write as it is fails whole, with one line,
// and nothing of it is trusted.
func TestCheckpointHostile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.json")
	cp := &Checkpoint{Claims: map[string]Prepared{uid1: samplePrepared(uid1)}}
	if err := cp.Save(good); err != nil {
		t.Fatal(err)
	}
	valid, _ := os.ReadFile(good)
	// resign rewrites a valid file with claims changed and a checksum that
	// matches, as someone who knows the format would.
	resign := func(edit func(p *Prepared) string) func(string) {
		return func(path string) {
			p := samplePrepared(uid1)
			uid := edit(&p)
			c := &Checkpoint{Claims: map[string]Prepared{uid: p}}
			if err := c.Save(path); err != nil {
				t.Fatal(err)
			}
		}
	}
	write := func(data string) func(string) {
		return func(path string) { os.WriteFile(path, []byte(data), 0o600) }
	}
	tests := []struct {
		name  string
		setup func(path string)
		want  string
	}{
		{"not JSON", write("\x00\x01garbage"), "not a checkpoint: invalid character '\\x00' looking for beginning of value"},
		{"empty", write(""), "not a checkpoint: EOF"},
		{"cut", write(string(valid[:len(valid)/2])), "not a checkpoint: unexpected EOF"},
		{"two objects", write(string(valid) + string(valid)), "not a checkpoint: data after the JSON object"},
		{"unknown field", write(`{"version":1,"driver":"gpu.wsl-gpu-hook.dev","claims":{},"checksum":"","extra":1}`), `not a checkpoint: json: unknown field "extra"`},
		{"version", write(strings.Replace(string(valid), `"version": 3`, `"version": 4`, 1)), "version 4, this driver reads 1 to 3"},
		{"driver", write(strings.Replace(string(valid), `"driver": "gpu.wsl-gpu-hook.dev"`, `"driver": "gpu.nvidia.com"`, 1)), `written for driver "gpu.nvidia.com", not gpu.wsl-gpu-hook.dev`},
		{"edited", write(strings.Replace(string(valid), "0x4486d1", "0x4486d2", 1)), "checksum mismatch: the file was changed or cut since the driver wrote it"},
		{"path in UID", resign(func(p *Prepared) string { return "../../etc" }), `claim "../../etc": claim UID "../../etc": want lowercase letters, digits and '-'`},
		{"foreign spec file", resign(func(p *Prepared) string { p.SpecFile = "../../../etc/cdi/x.json"; return uid1 }),
			`claim "` + uid1 + `": spec file "../../../etc/cdi/x.json" is not the claim's (gpu.wsl-gpu-hook.dev-claim_` + uid1 + `.json)`},
		{"foreign CDI device", resign(func(p *Prepared) string { p.Devices[0].CDIDevice = "nvidia.com/gpu=all"; return uid1 }),
			`claim "` + uid1 + `": device "nvidia-2520-3a5c17aa-0": CDI device "nvidia.com/gpu=all" is not "gpu.wsl-gpu-hook.dev/claim=` + uid1 + `-nvidia-2520-3a5c17aa-0"`},
		{"bad device", resign(func(p *Prepared) string { p.Devices[0].Device = "A/B"; return uid1 }),
			`claim "` + uid1 + `": device "A/B": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`},
		{"no devices", resign(func(p *Prepared) string { p.Devices = nil; return uid1 }), `claim "` + uid1 + `": no devices`},
		{"no spec", resign(func(p *Prepared) string { p.Spec = nil; return uid1 }), `claim "` + uid1 + `": no spec`},
		{"spec in version 1", write(strings.Replace(string(valid), `"version": 3`, `"version": 1`, 1)), `claim "` + uid1 + `": a spec in a version 1 checkpoint`},
		{"share in version 2", func(path string) {
			resign(func(p *Prepared) string { p.Devices[0].ShareID, p.Devices[0].Memory = uid2, 1<<30; return uid1 })(path)
			data, _ := os.ReadFile(path)
			os.WriteFile(path, []byte(strings.Replace(string(data), `"version": 3`, `"version": 2`, 1)), 0o600)
		}, `claim "` + uid1 + `": a share or metadata in a version 2 checkpoint`},
		{"bad share", resign(func(p *Prepared) string { p.Devices[0].ShareID = "A/../b"; return uid1 }),
			`claim "` + uid1 + `": device "nvidia-2520-3a5c17aa-0": share "A/../b" of 0 bytes`},
		{"negative memory", resign(func(p *Prepared) string { p.Devices[0].Memory = -1; return uid1 }),
			`claim "` + uid1 + `": device "nvidia-2520-3a5c17aa-0": share "" of -1 bytes`},
		{"metadata request a path", resign(func(p *Prepared) string { p.Metadata = map[string]string{"../../etc/x": "{}"}; return uid1 }),
			`claim "` + uid1 + `": metadata of request "../../etc/x": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`},
		{"spec of another kind", resign(func(p *Prepared) string { p.Spec.Kind = "nvidia.com/gpu"; return uid1 }), `claim "` + uid1 + `": spec of kind "nvidia.com/gpu", not gpu.wsl-gpu-hook.dev/claim`},
		{"spec of another claim", resign(func(p *Prepared) string { p.Spec.Devices[0].Name = uid2 + "-" + nvDev; return uid1 }),
			`claim "` + uid1 + `": spec devices [` + uid2 + `-` + nvDev + `], not the claim's [` + uid1 + `-` + nvDev + `]`},
		{"spec with a device more", resign(func(p *Prepared) string {
			p.Spec.Devices = append(p.Spec.Devices, p.Spec.Devices[0])
			p.Spec.Devices[1].Name = uid1 + "-all"
			return uid1
		}), `claim "` + uid1 + `": spec devices [` + uid1 + `-all ` + uid1 + `-` + nvDev + `], not the claim's [` + uid1 + `-` + nvDev + `]`},
		{"directory", func(path string) { os.Mkdir(path, 0o700) }, "not a regular file"},
		{"symlink to a directory", func(path string) { os.Symlink(dir, path) }, "not a regular file"},
		{"too large", func(path string) { os.WriteFile(path, make([]byte, maxCheckpoint+1), 0o600) }, "4194305 bytes, more than the 4194304 a checkpoint can hold"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, "cp"+string(rune('a'+i))+".json")
			tt.setup(path)
			got, err := LoadCheckpoint(path)
			var ce *CorruptCheckpointError
			if !errors.As(err, &ce) {
				t.Fatalf("LoadCheckpoint = %v, want a *CorruptCheckpointError", err)
			}
			if want := "checkpoint " + path + " is corrupt: " + tt.want; err.Error() != want {
				t.Errorf("error\n got %s\nwant %s", err, want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error is not one line: %q", err)
			}
			if got != nil {
				t.Errorf("claims = %+v, want none", got)
			}
		})
	}
}

// fakeFile is an open checkpoint whose Stat or Read fails as a disk can.
type fakeFile struct {
	size             int64
	statErr, readErr error
}

func (f fakeFile) Stat() (fs.FileInfo, error) {
	if f.statErr != nil {
		return nil, f.statErr
	}
	return fakeInfo(f.size), nil
}
func (f fakeFile) Read(p []byte) (int, error) { return 0, f.readErr }
func (f fakeFile) Close() error               { return nil }

type fakeInfo int64

func (i fakeInfo) Name() string       { return "checkpoint.json" }
func (i fakeInfo) Size() int64        { return int64(i) }
func (i fakeInfo) Mode() fs.FileMode  { return 0o600 }
func (i fakeInfo) ModTime() time.Time { return time.Time{} }
func (i fakeInfo) IsDir() bool        { return false }
func (i fakeInfo) Sys() any           { return nil }

// A checkpoint that cannot be read is not a corrupt one: a
// *CheckpointReadError, which the driver keeps and reads again, never a
// *CorruptCheckpointError, which it moves aside.
func TestCheckpointUnreadable(t *testing.T) {
	const path = "/var/lib/kubelet/plugins/gpu.wsl-gpu-hook.dev/checkpoint.json"
	openErr := func(err error) func(string) (fs.File, error) {
		return func(name string) (fs.File, error) { return nil, &fs.PathError{Op: "open", Path: name, Err: err} }
	}
	file := func(f fakeFile) func(string) (fs.File, error) {
		return func(string) (fs.File, error) { return f, nil }
	}
	tests := []struct {
		name string
		open func(string) (fs.File, error)
		want string
	}{
		{"EACCES", openErr(syscall.EACCES), "read checkpoint " + path + ": open " + path + ": permission denied"},
		{"EMFILE", openErr(syscall.EMFILE), "read checkpoint " + path + ": open " + path + ": too many open files"},
		{"EIO at stat", file(fakeFile{statErr: syscall.EIO}), "read checkpoint " + path + ": input/output error"},
		{"EIO at read", file(fakeFile{size: 100, readErr: syscall.EIO}), "read checkpoint " + path + ": input/output error"},
		{"cut while read", file(fakeFile{size: 100, readErr: io.EOF}), "read checkpoint " + path + ": EOF"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cp, err := loadCheckpoint(path, tt.open)
			var re *CheckpointReadError
			var ce *CorruptCheckpointError
			if cp != nil || !errors.As(err, &re) || errors.As(err, &ce) || err.Error() != tt.want {
				t.Errorf("loadCheckpoint = %+v, %v\nwant a *CheckpointReadError: %s", cp, err, tt.want)
			}
		})
	}
	t.Run("unreadable file", func(t *testing.T) {
		if os.Geteuid() == 0 {
			t.Skip("root reads a mode 000 file: the injected EACCES above stands for it")
		}
		path := filepath.Join(t.TempDir(), "checkpoint.json")
		if err := (&Checkpoint{Claims: map[string]Prepared{uid1: samplePrepared(uid1)}}).Save(path); err != nil {
			t.Fatal(err)
		}
		os.Chmod(path, 0)
		var re *CheckpointReadError
		if _, err := LoadCheckpoint(path); !errors.As(err, &re) || !errors.Is(err, fs.ErrPermission) {
			t.Errorf("LoadCheckpoint(mode 000) = %v, want a *CheckpointReadError for EACCES", err)
		}
	})
}

// A corrupt checkpoint is renamed aside with its bytes, never over
// another file, and only the newest three such copies stay.
func TestMoveCheckpointAside(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "checkpoint.json")
	var moved []string
	for i := range 5 {
		os.WriteFile(path, []byte{'0' + byte(i)}, 0o600)
		to, err := MoveCheckpointAside(path, t0.Add(time.Duration(i)*time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		moved = append(moved, to)
	}
	if want := path + ".corrupt-20261126T040000.000000000Z"; moved[0] != want {
		t.Errorf("moved to %s, want %s", moved[0], want)
	}
	entries, _ := os.ReadDir(dir)
	var got []string
	for _, e := range entries {
		data, _ := os.ReadFile(filepath.Join(dir, e.Name()))
		got = append(got, e.Name()+"="+string(data))
	}
	want := []string{filepath.Base(moved[2]) + "=2", filepath.Base(moved[3]) + "=3", filepath.Base(moved[4]) + "=4"}
	if !slices.Equal(got, want) {
		t.Errorf("dir = %v, want %v", got, want)
	}
	os.WriteFile(path, []byte("new"), 0o600)
	if to, err := MoveCheckpointAside(path, t0.Add(4*time.Hour)); err == nil || to != "" {
		t.Errorf("MoveCheckpointAside onto an existing copy = %q, %v; want an error", to, err)
	}
	if data, _ := os.ReadFile(moved[4]); string(data) != "4" {
		t.Errorf("existing copy overwritten: %q", data)
	}
}

// A version 1 checkpoint is read, its claims without a spec; AdoptSpec
// completes one with its file's spec when that is the claim's, and
// RebuildSpec with the spec prepare writes now.
func TestCheckpointVersion1(t *testing.T) {
	// Written by the version 1 driver (commit dce37a8) for claim uid1 on
	// the NVIDIA GPU of nvidia-laptop.
	cp, err := LoadCheckpoint("testdata/checkpoint-v1.json")
	if err != nil {
		t.Fatal(err)
	}
	old := cp.Claims[uid1]
	want := samplePrepared(uid1)
	want.Spec = nil
	if !reflect.DeepEqual(old, want) {
		t.Fatalf("version 1 claim = %+v\nwant %+v", old, want)
	}
	if _, err := old.SpecData(); err == nil || err.Error() != "claim default/gpu: the checkpoint records no spec" {
		t.Errorf("SpecData of a version 1 claim = %v", err)
	}

	good, _ := samplePrepared(uid1).SpecData()
	other, _ := samplePrepared(uid2).SpecData()
	foreign := strings.Replace(string(good), `"kind": "gpu.wsl-gpu-hook.dev/claim"`, `"kind": "nvidia.com/gpu"`, 1)
	for _, tt := range []struct {
		name, data, want string
	}{
		{"its own spec", string(good), ""},
		{"another claim's", string(other), "spec devices [" + uid2 + "-" + nvDev + "], not the claim's [" + uid1 + "-" + nvDev + "]"},
		{"another kind", foreign, `spec of kind "nvidia.com/gpu", not gpu.wsl-gpu-hook.dev/claim`},
		{"not JSON", "kind: x", "not a CDI spec: invalid character 'k' looking for beginning of value"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, err := AdoptSpec(uid1, old, []byte(tt.data))
			if tt.want != "" {
				if err == nil || err.Error() != tt.want || p.Spec != nil {
					t.Errorf("AdoptSpec = %+v, %v\nwant error %s", p.Spec, err, tt.want)
				}
				return
			}
			if data, _ := p.SpecData(); err != nil || string(data) != string(good) {
				t.Errorf("AdoptSpec = %s, %v\nwant %s", data, err, good)
			}
		})
	}

	inv := inventory(t, "nvidia-laptop")
	bare := old
	// What a version 1 prepare wrote: the selection, none of what sharing
	// and the metadata added since.
	want.Spec, err = cdispec.Transient(CDIKind, []cdispec.Named{{Name: uid1 + "-" + nvDev, Selection: cdiselect.Selection{LUID: dxcore.LUID{Low: 0x4486d1}, Index: -1}}}, inv, specOpt)
	if err != nil {
		t.Fatal(err)
	}
	rebuilt, err := RebuildSpec(uid1, bare, inv, specOpt)
	if err != nil || !reflect.DeepEqual(rebuilt, want) {
		t.Errorf("RebuildSpec = %+v, %v\nwant %+v", rebuilt.Spec, err, want.Spec)
	}
	bare.Devices = slices.Clone(bare.Devices)
	bare.Devices[0].LUID = "0x0"
	if _, err := RebuildSpec(uid1, bare, inv, specOpt); err == nil || err.Error() != `device nvidia-2520-3a5c17aa-0: LUID "0x0": the spec cannot be rebuilt: delete the pods using the claim` {
		t.Errorf("RebuildSpec without a LUID = %v", err)
	}
}
