// Package specpatch adds the GPU to a bundle's config.json before the real
// runtime sees it, for the runtime wrapper (Docker --runtime, containerd
// runtime handlers).
//
// Putting /dev/dxg into linux.devices with its allow rule in
// linux.resources.devices makes the runtime create the node and own the
// cgroup rule, so the rule survives `runc update` and systemd reloads, which
// rules a hook adds behind the runtime's back do not (NVIDIA toolkit#48).
//
// The config is edited as raw JSON objects: every field this package does
// not own, including ones from newer runtime-spec versions, passes through
// unchanged.
package specpatch

import (
	"encoding/json"
	"fmt"
	"os"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/devnode"
)

// object is a JSON object whose members we do not all know.
type object map[string]json.RawMessage

func (o object) get(key string, v any) error {
	raw, ok := o[key]
	if !ok || string(raw) == "null" {
		return nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("decode %s: %w", key, err)
	}
	return nil
}

func (o object) set(key string, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	o[key] = raw
	return nil
}

// AddGPU returns config with the host's node at path in linux.devices
// (mode 0666) and its rwm allow rule, and hook appended to hooks.prestart
// unless a hook with the same path is already there. It is idempotent.
func AddGPU(config []byte, path string, node devnode.Node, hook specs.Hook) ([]byte, error) {
	major, minor := int64(node.Major), int64(node.Minor)
	var top object
	if err := json.Unmarshal(config, &top); err != nil {
		return nil, fmt.Errorf("decode config.json: %w", err)
	}
	if top == nil {
		return nil, fmt.Errorf("decode config.json: not a JSON object")
	}
	linux := object{}
	if err := top.get("linux", &linux); err != nil {
		return nil, err
	}
	if linux == nil {
		linux = object{}
	}

	var devices []json.RawMessage
	if err := linux.get("devices", &devices); err != nil {
		return nil, err
	}
	present := false
	for _, raw := range devices {
		var d specs.LinuxDevice
		if json.Unmarshal(raw, &d) == nil && d.Path == path {
			present = true
		}
	}
	if !present {
		mode := os.FileMode(0o666)
		uid, gid := uint32(0), uint32(0)
		raw, err := json.Marshal(specs.LinuxDevice{Path: path, Type: "c", Major: major, Minor: minor, FileMode: &mode, UID: &uid, GID: &gid})
		if err != nil {
			return nil, err
		}
		devices = append(devices, raw)
		if err := linux.set("devices", devices); err != nil {
			return nil, err
		}
	}

	resources := object{}
	if err := linux.get("resources", &resources); err != nil {
		return nil, err
	}
	if resources == nil {
		resources = object{}
	}
	var rules []json.RawMessage
	if err := resources.get("devices", &rules); err != nil {
		return nil, err
	}
	allowed := false
	for _, raw := range rules {
		var r specs.LinuxDeviceCgroup
		if json.Unmarshal(raw, &r) == nil && r.Allow && r.Type == "c" &&
			r.Major != nil && *r.Major == major && r.Minor != nil && *r.Minor == minor && r.Access == "rwm" {
			allowed = true
		}
	}
	if !allowed {
		raw, err := json.Marshal(specs.LinuxDeviceCgroup{Allow: true, Type: "c", Major: &major, Minor: &minor, Access: "rwm"})
		if err != nil {
			return nil, err
		}
		rules = append(rules, raw)
		if err := resources.set("devices", rules); err != nil {
			return nil, err
		}
		if err := linux.set("resources", resources); err != nil {
			return nil, err
		}
	}
	if err := top.set("linux", linux); err != nil {
		return nil, err
	}

	hooks := object{}
	if err := top.get("hooks", &hooks); err != nil {
		return nil, err
	}
	if hooks == nil {
		hooks = object{}
	}
	var prestart []specs.Hook
	if err := hooks.get("prestart", &prestart); err != nil {
		return nil, err
	}
	hooked := false
	for _, h := range prestart {
		if h.Path == hook.Path {
			hooked = true
		}
	}
	if !hooked {
		prestart = append(prestart, hook)
		if err := hooks.set("prestart", prestart); err != nil {
			return nil, err
		}
		if err := top.set("hooks", hooks); err != nil {
			return nil, err
		}
	}
	return json.Marshal(top)
}
