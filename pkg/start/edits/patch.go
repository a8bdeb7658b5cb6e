package edits

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Patch returns config, a bundle's config.json, with e in it, for the
// runtime wrapper: the nodes in linux.devices (mode 0666, root's) with
// their allow rules in linux.resources.devices, so the runtime makes them
// and owns their rules; the binds in mounts; the variables in process.env;
// the hooks in hooks.<stage>. Files, loader-cache entries, links and
// aliases have no config.json form: the value's hook makes them.
//
// config is decoded once and encoded once: its members are kept as written
// but for the ones Patch edits (linux, mounts, process, hooks), each
// decoded once down to the arrays it adds to, numbers as written; every
// member Patch does not own, including ones from newer runtime-spec
// versions, passes through. Objects it edits come out with their keys
// sorted. What is there already (a node or mount at the same path, a rule
// that allows as much, a hook with the same path) is not added again, so
// Patch is idempotent.
// A variable the container sets already is kept as the user set it;
// Patch returns those it left out for that.
func (e Edits) Patch(config []byte) ([]byte, []string, error) {
	var top raw
	if err := json.Unmarshal(config, &top); err != nil {
		return nil, nil, fmt.Errorf("decode config.json: %w", err)
	}
	if top == nil {
		return nil, nil, errors.New("decode config.json: not a JSON object")
	}
	if e.Node.Path != "" || len(e.Devices) > 0 {
		if err := patchDevices(top, append([]Device{e.Node}, e.Devices...)); err != nil {
			return nil, nil, err
		}
	}
	if len(e.Mounts) > 0 {
		if err := patchMounts(top, e.Mounts); err != nil {
			return nil, nil, err
		}
	}
	var kept []string
	if len(e.Env) > 0 {
		var err error
		if kept, err = patchEnv(top, e.Env); err != nil {
			return nil, nil, err
		}
	}
	if len(e.Hooks) > 0 {
		if err := patchHooks(top, e.Hooks); err != nil {
			return nil, nil, err
		}
	}
	out, err := json.Marshal(top)
	return out, kept, err
}

// raw is a JSON object whose members are decoded only where Patch
// changes them: the rest passes through as written.
type raw map[string]json.RawMessage

// object decodes o's member key as an object; missing or null is empty.
func (o raw) object(key string) (raw, error) {
	var m raw
	if v, ok := o[key]; ok {
		if err := json.Unmarshal(v, &m); err != nil {
			return nil, fmt.Errorf("decode %s: %w", key, err)
		}
	}
	if m == nil {
		m = raw{}
	}
	return m, nil
}

// array decodes o's member key as an array of values (numbers kept as
// written); missing or null is nil.
func (o raw) array(key string) ([]any, error) {
	v, ok := o[key]
	if !ok {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.UseNumber()
	var a []any
	if err := dec.Decode(&a); err != nil {
		return nil, fmt.Errorf("decode %s: %w", key, err)
	}
	return a, nil
}

// set encodes v as o's member key.
func (o raw) set(key string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	o[key] = data
	return nil
}

func patchDevices(top raw, devs []Device) error {
	linux, err := top.object("linux")
	if err != nil {
		return err
	}
	devices, err := linux.array("devices")
	if err != nil {
		return err
	}
	resources, err := linux.object("resources")
	if err != nil {
		return err
	}
	rules, err := resources.array("devices")
	if err != nil {
		return err
	}
	for _, d := range devs {
		if d.Path == "" {
			continue
		}
		major, minor := int64(d.Node.Major), int64(d.Node.Minor)
		if !slices.ContainsFunc(devices, func(v any) bool { m, _ := v.(map[string]any); return m != nil && m["path"] == d.Path }) {
			devices = append(devices, map[string]any{
				"path": d.Path, "type": "c", "major": major, "minor": minor,
				"fileMode": 0o666, "uid": 0, "gid": 0,
			})
		}
		if !slices.ContainsFunc(rules, func(v any) bool { return allows(v, major, minor, d.Access) }) {
			rules = append(rules, map[string]any{"allow": true, "type": "c", "major": major, "minor": minor, "access": d.Access})
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

// allows reports whether rule v (decoded) allows character device
// major:minor at least access.
func allows(v any, major, minor int64, access string) bool {
	r, _ := v.(map[string]any)
	if r == nil || r["allow"] != true || r["type"] != "c" || !number(r["major"], major) || !number(r["minor"], minor) {
		return false
	}
	have, _ := r["access"].(string)
	for _, c := range access {
		if !strings.ContainsRune(have, c) {
			return false
		}
	}
	return true
}

func number(v any, want int64) bool {
	n, ok := v.(json.Number)
	return ok && n.String() == strconv.FormatInt(want, 10)
}

func patchMounts(top raw, add []Mount) error {
	mounts, err := top.array("mounts")
	if err != nil {
		return err
	}
	for _, m := range add {
		if slices.ContainsFunc(mounts, func(v any) bool { o, _ := v.(map[string]any); return o != nil && o["destination"] == m.Target }) {
			continue
		}
		mounts = append(mounts, map[string]any{
			"destination": m.Target, "type": "bind", "source": m.Source,
			"options": append([]string{}, cdiMountOptions...),
		})
	}
	return top.set("mounts", mounts)
}

func patchEnv(top raw, add []string) ([]string, error) {
	process, err := top.object("process")
	if err != nil {
		return nil, err
	}
	var env []string
	if v, ok := process["env"]; ok {
		if err := json.Unmarshal(v, &env); err != nil {
			return nil, fmt.Errorf("decode env: %w", err)
		}
	}
	set := map[string]bool{}
	have := map[string]bool{}
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		set[k], have[kv] = true, true
	}
	var kept []string
	for _, kv := range add {
		k, _, _ := strings.Cut(kv, "=")
		if set[k] {
			if !have[kv] {
				kept = append(kept, kv)
			}
			continue
		}
		set[k] = true
		env = append(env, kv)
	}
	if err := process.set("env", env); err != nil {
		return nil, err
	}
	return kept, top.set("process", process)
}

func patchHooks(top raw, add []Hook) error {
	hooks, err := top.object("hooks")
	if err != nil {
		return err
	}
	changed := false
	for _, h := range add {
		list, err := hooks.array(h.Stage)
		if err != nil {
			return err
		}
		if slices.ContainsFunc(list, func(v any) bool { o, _ := v.(map[string]any); return o != nil && o["path"] == h.Path }) {
			continue
		}
		hook := map[string]any{"path": h.Path}
		if len(h.Args) > 0 {
			hook["args"] = h.Args
		}
		if err := hooks.set(h.Stage, append(list, hook)); err != nil {
			return err
		}
		changed = true
	}
	if !changed {
		return nil
	}
	return top.set("hooks", hooks)
}
