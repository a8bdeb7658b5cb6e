package oci

import (
	"encoding/json"
	"os"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/oci/internal/jsonlex"
)

// The fast decoder below reads the state and config.json without
// encoding/json: in a fresh process (a hook runs once per container start)
// json.Unmarshal's first call builds its per-type decoders and touches much
// code, and even json.Valid's first call costs ~0.1 ms on a test VM, while
// the document itself takes microseconds.
//
// It is equivalent to json.Unmarshal into the same types, but only decides
// what it is sure encoding/json decides the same way. jsonlex walks and
// checks the document and gives up (ok=false) on what it cannot decide as
// encoding/json would; this file maps the fields the hook reads onto the
// runtime-spec types, and gives up on a value of the wrong JSON type.
// Giving up returns ok=false, and the caller then decodes with
// encoding/json, which gives its usual result or error. So results and
// errors are encoding/json's by construction; a differential fuzz test
// (FuzzFastDecode) holds the fast path to that.

// decodeState is json.Unmarshal of a state, fast when it can be.
func decodeState(data []byte) (State, error) {
	if st, ok := fastState(data); ok {
		return st, nil
	}
	var st State
	err := json.Unmarshal(data, &st)
	return st, err
}

// decodeSpec is json.Unmarshal of a config.json, fast when it can be.
func decodeSpec(data []byte) (*Spec, error) {
	if s, ok := fastSpec(data); ok {
		return &s, nil
	}
	var s Spec
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// fastState decodes a state, or reports ok=false.
func fastState(data []byte) (st State, ok bool) {
	d := jsonlex.NewDecoder(data)
	if d.Null() {
		return st, d.End()
	}
	ok = d.Object([]string{"ociVersion", "id", "status", "pid", "bundle", "annotations", "root"}, func(i int) bool {
		switch i {
		case 0:
			return d.Str(&st.Version)
		case 1:
			return d.Str(&st.ID)
		case 2:
			s := string(st.Status)
			ok := d.Str(&s)
			st.Status = specs.ContainerState(s)
			return ok
		case 3:
			var n int64
			if !d.Int64(&n) {
				return false
			}
			st.Pid = int(n)
			return true
		case 4:
			return d.Str(&st.Bundle)
		case 5:
			return d.StringMap(&st.Annotations)
		default:
			return d.Str(&st.Root)
		}
	})
	return st, ok && d.End()
}

// fastSpec decodes a config.json, or reports ok=false.
func fastSpec(data []byte) (s Spec, ok bool) {
	d := jsonlex.NewDecoder(data)
	if d.Null() {
		return s, d.End()
	}
	ok = d.Object([]string{"root", "process", "annotations", "linux", "mounts"}, func(i int) bool {
		switch i {
		case 0:
			if d.Null() {
				return true
			}
			s.Root = &specs.Root{}
			return d.Object([]string{"path", "readonly"}, func(i int) bool {
				if i == 0 {
					return d.Str(&s.Root.Path)
				}
				return d.Bool(&s.Root.Readonly)
			})
		case 1:
			if d.Null() {
				return true
			}
			s.Process = &Process{}
			return d.Object([]string{"env"}, func(int) bool { return d.Strs(&s.Process.Env) })
		case 2:
			return d.StringMap(&s.Annotations)
		case 3:
			if d.Null() {
				return true
			}
			s.Linux = &Linux{}
			return decodeLinux(&d, s.Linux)
		default:
			if d.Null() {
				return true
			}
			s.Mounts = []specs.Mount{}
			return d.Array(func() bool {
				s.Mounts = append(s.Mounts, specs.Mount{})
				return decodeMount(&d, &s.Mounts[len(s.Mounts)-1])
			})
		}
	})
	return s, ok && d.End()
}

func decodeLinux(d *jsonlex.Decoder, l *Linux) bool {
	return d.Object([]string{"resources", "devices", "namespaces"}, func(i int) bool {
		if d.Null() {
			return true
		}
		switch i {
		case 0:
			l.Resources = &Resources{}
			return d.Object([]string{"devices"}, func(int) bool {
				if d.Null() {
					return true
				}
				l.Resources.Devices = []specs.LinuxDeviceCgroup{}
				return d.Array(func() bool {
					l.Resources.Devices = append(l.Resources.Devices, specs.LinuxDeviceCgroup{})
					return decodeDeviceRule(d, &l.Resources.Devices[len(l.Resources.Devices)-1])
				})
			})
		case 1:
			l.Devices = []specs.LinuxDevice{}
			return d.Array(func() bool {
				l.Devices = append(l.Devices, specs.LinuxDevice{})
				return decodeDevice(d, &l.Devices[len(l.Devices)-1])
			})
		default:
			l.Namespaces = []specs.LinuxNamespace{}
			return d.Array(func() bool {
				l.Namespaces = append(l.Namespaces, specs.LinuxNamespace{})
				ns := &l.Namespaces[len(l.Namespaces)-1]
				if d.Null() {
					return true
				}
				return d.Object([]string{"type", "path"}, func(i int) bool {
					if i == 1 {
						return d.Str(&ns.Path)
					}
					t := string(ns.Type)
					ok := d.Str(&t)
					ns.Type = specs.LinuxNamespaceType(t)
					return ok
				})
			})
		}
	})
}

func decodeDeviceRule(d *jsonlex.Decoder, r *specs.LinuxDeviceCgroup) bool {
	if d.Null() {
		return true
	}
	return d.Object([]string{"allow", "type", "major", "minor", "access"}, func(i int) bool {
		switch i {
		case 0:
			return d.Bool(&r.Allow)
		case 1:
			return d.Str(&r.Type)
		case 2, 3:
			if d.Null() {
				return true
			}
			n := new(int64)
			if i == 2 {
				r.Major = n
			} else {
				r.Minor = n
			}
			return d.Int64(n)
		default:
			return d.Str(&r.Access)
		}
	})
}

func decodeDevice(d *jsonlex.Decoder, dev *specs.LinuxDevice) bool {
	if d.Null() {
		return true
	}
	return d.Object([]string{"path", "type", "major", "minor", "fileMode", "uid", "gid"}, func(i int) bool {
		switch i {
		case 0:
			return d.Str(&dev.Path)
		case 1:
			return d.Str(&dev.Type)
		case 2:
			return d.Int64(&dev.Major)
		case 3:
			return d.Int64(&dev.Minor)
		}
		if d.Null() {
			return true
		}
		n := new(uint32)
		switch i {
		case 4:
			if !d.Uint32(n) {
				return false
			}
			m := os.FileMode(*n)
			dev.FileMode = &m
			return true
		case 5:
			dev.UID = n
		default:
			dev.GID = n
		}
		return d.Uint32(n)
	})
}

func decodeMount(d *jsonlex.Decoder, m *specs.Mount) bool {
	if d.Null() {
		return true
	}
	return d.Object([]string{"destination", "type", "source", "options", "uidMappings", "gidMappings"}, func(i int) bool {
		switch i {
		case 0:
			return d.Str(&m.Destination)
		case 1:
			return d.Str(&m.Type)
		case 2:
			return d.Str(&m.Source)
		case 3:
			return d.Strs(&m.Options)
		}
		if d.Null() {
			return true
		}
		maps := &m.UIDMappings
		if i == 5 {
			maps = &m.GIDMappings
		}
		*maps = []specs.LinuxIDMapping{}
		return d.Array(func() bool {
			*maps = append(*maps, specs.LinuxIDMapping{})
			idm := &(*maps)[len(*maps)-1]
			if d.Null() {
				return true
			}
			return d.Object([]string{"containerID", "hostID", "size"}, func(i int) bool {
				switch i {
				case 0:
					return d.Uint32(&idm.ContainerID)
				case 1:
					return d.Uint32(&idm.HostID)
				}
				return d.Uint32(&idm.Size)
			})
		})
	})
}
