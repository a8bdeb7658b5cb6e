package specpatch

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/devnode"
)

// Device is a host node and where the container gets it.
type Device struct {
	// Path is the container path.
	Path string
	Node devnode.Node
}

// Extras is what a vendor stack or a capability adds besides /dev/dxg
// (package vendorstack decides it): character devices with an rw allow
// rule, read-only binds, and environment variables.
type Extras struct {
	Devices []Device
	Mounts  []specs.Mount
	// Env is NAME=VALUE; a variable the container sets already is kept as
	// the user set it.
	Env []string
}

// AddExtras returns config with x added: each device in linux.devices (mode
// 0666) with an rw rule, each mount unless one has its destination, each
// variable unless process.env sets it. It returns the variables it left
// out because the container sets them. It is idempotent.
func AddExtras(config []byte, x Extras) ([]byte, []string, error) {
	var top object
	if err := json.Unmarshal(config, &top); err != nil {
		return nil, nil, fmt.Errorf("decode config.json: %w", err)
	}
	if top == nil {
		return nil, nil, fmt.Errorf("decode config.json: not a JSON object")
	}
	if len(x.Devices) > 0 {
		if err := addDevices(top, x.Devices); err != nil {
			return nil, nil, err
		}
	}
	if len(x.Mounts) > 0 {
		var mounts []json.RawMessage
		if err := top.get("mounts", &mounts); err != nil {
			return nil, nil, err
		}
		have := map[string]bool{}
		for _, raw := range mounts {
			var m specs.Mount
			if json.Unmarshal(raw, &m) == nil {
				have[m.Destination] = true
			}
		}
		for _, m := range x.Mounts {
			if have[m.Destination] {
				continue
			}
			raw, err := json.Marshal(m)
			if err != nil {
				return nil, nil, err
			}
			mounts = append(mounts, raw)
		}
		if err := top.set("mounts", mounts); err != nil {
			return nil, nil, err
		}
	}
	var kept []string
	if len(x.Env) > 0 {
		process := object{}
		if err := top.get("process", &process); err != nil {
			return nil, nil, err
		}
		if process == nil {
			process = object{}
		}
		var env []string
		if err := process.get("env", &env); err != nil {
			return nil, nil, err
		}
		set := map[string]bool{}
		for _, kv := range env {
			k, _, _ := strings.Cut(kv, "=")
			set[k] = true
		}
		for _, kv := range x.Env {
			k, _, _ := strings.Cut(kv, "=")
			if set[k] {
				if !slices.Contains(env, kv) {
					kept = append(kept, kv)
				}
				continue
			}
			set[k] = true
			env = append(env, kv)
		}
		if err := process.set("env", env); err != nil {
			return nil, nil, err
		}
		if err := top.set("process", process); err != nil {
			return nil, nil, err
		}
	}
	out, err := json.Marshal(top)
	return out, kept, err
}

// addDevices puts each device and its rw allow rule into top's linux
// section, skipping what is there already.
func addDevices(top object, devs []Device) error {
	linux := object{}
	if err := top.get("linux", &linux); err != nil {
		return err
	}
	if linux == nil {
		linux = object{}
	}
	var devices []json.RawMessage
	if err := linux.get("devices", &devices); err != nil {
		return err
	}
	have := map[string]bool{}
	for _, raw := range devices {
		var d specs.LinuxDevice
		if json.Unmarshal(raw, &d) == nil {
			have[d.Path] = true
		}
	}
	resources := object{}
	if err := linux.get("resources", &resources); err != nil {
		return err
	}
	if resources == nil {
		resources = object{}
	}
	var rules []json.RawMessage
	if err := resources.get("devices", &rules); err != nil {
		return err
	}
	allowed := map[[2]int64]bool{}
	for _, raw := range rules {
		var r specs.LinuxDeviceCgroup
		if json.Unmarshal(raw, &r) == nil && r.Allow && r.Type == "c" && r.Major != nil && r.Minor != nil && strings.Contains(r.Access, "r") && strings.Contains(r.Access, "w") {
			allowed[[2]int64{*r.Major, *r.Minor}] = true
		}
	}
	for _, dev := range devs {
		if !have[dev.Path] {
			have[dev.Path] = true
			mode := os.FileMode(0o666)
			uid, gid := uint32(0), uint32(0)
			raw, err := json.Marshal(specs.LinuxDevice{Path: dev.Path, Type: "c", Major: int64(dev.Node.Major), Minor: int64(dev.Node.Minor), FileMode: &mode, UID: &uid, GID: &gid})
			if err != nil {
				return err
			}
			devices = append(devices, raw)
		}
		major, minor := int64(dev.Node.Major), int64(dev.Node.Minor)
		if key := [2]int64{major, minor}; !allowed[key] {
			allowed[key] = true
			raw, err := json.Marshal(specs.LinuxDeviceCgroup{Allow: true, Type: "c", Major: &major, Minor: &minor, Access: "rw"})
			if err != nil {
				return err
			}
			rules = append(rules, raw)
		}
	}
	if err := linux.set("devices", devices); err != nil {
		return err
	}
	if err := resources.set("devices", rules); err != nil {
		return err
	}
	if err := linux.set("resources", resources); err != nil {
		return err
	}
	return top.set("linux", linux)
}
