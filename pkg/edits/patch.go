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
// config is decoded once and encoded once. Every member Patch does not own,
// including ones from newer runtime-spec versions, passes through (numbers
// as written); objects come out with their keys sorted. What is there
// already (a node or mount at the same path, a rule that allows as much, a
// hook with the same path) is not added again, so Patch is idempotent.
// A variable the container sets already is kept as the user set it;
// Patch returns those it left out for that.
func (e Edits) Patch(config []byte) ([]byte, []string, error) {
	dec := json.NewDecoder(bytes.NewReader(config))
	dec.UseNumber()
	var top map[string]any
	if err := dec.Decode(&top); err != nil {
		return nil, nil, fmt.Errorf("decode config.json: %w", err)
	}
	if _, err := dec.Token(); err == nil {
		return nil, nil, errors.New("decode config.json: data after the object")
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
	for _, h := range e.Hooks {
		if err := patchHook(top, h); err != nil {
			return nil, nil, err
		}
	}
	out, err := json.Marshal(top)
	return out, kept, err
}

// object returns o's member key as an object, made (and put in o) when
// missing or null.
func object(o map[string]any, key string) (map[string]any, error) {
	switch v := o[key].(type) {
	case map[string]any:
		return v, nil
	case nil:
		m := map[string]any{}
		o[key] = m
		return m, nil
	}
	return nil, fmt.Errorf("decode %s: not a JSON object", key)
}

// array returns o's member key as an array; nil when missing or null.
func array(o map[string]any, key string) ([]any, error) {
	switch v := o[key].(type) {
	case []any:
		return v, nil
	case nil:
		return nil, nil
	}
	return nil, fmt.Errorf("decode %s: not a JSON array", key)
}

func patchDevices(top map[string]any, devs []Device) error {
	linux, err := object(top, "linux")
	if err != nil {
		return err
	}
	devices, err := array(linux, "devices")
	if err != nil {
		return err
	}
	resources, err := object(linux, "resources")
	if err != nil {
		return err
	}
	rules, err := array(resources, "devices")
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
	linux["devices"] = devices
	resources["devices"] = rules
	return nil
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

func patchMounts(top map[string]any, add []Mount) error {
	mounts, err := array(top, "mounts")
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
	top["mounts"] = mounts
	return nil
}

func patchEnv(top map[string]any, add []string) ([]string, error) {
	process, err := object(top, "process")
	if err != nil {
		return nil, err
	}
	env, err := array(process, "env")
	if err != nil {
		return nil, err
	}
	set := map[string]bool{}
	have := map[string]bool{}
	for _, v := range env {
		kv, ok := v.(string)
		if !ok {
			return nil, errors.New("decode env: not a list of strings")
		}
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
	process["env"] = env
	return kept, nil
}

func patchHook(top map[string]any, h Hook) error {
	hooks, err := object(top, "hooks")
	if err != nil {
		return err
	}
	list, err := array(hooks, h.Stage)
	if err != nil {
		return err
	}
	if slices.ContainsFunc(list, func(v any) bool { o, _ := v.(map[string]any); return o != nil && o["path"] == h.Path }) {
		return nil
	}
	hook := map[string]any{"path": h.Path}
	if len(h.Args) > 0 {
		hook["args"] = h.Args
	}
	hooks[h.Stage] = append(list, hook)
	return nil
}
