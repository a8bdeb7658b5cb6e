package install

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/wsl"
)

// Docker plans what Docker needs: the link nvidia-container-runtime-hook
// (dockerd runs an executable of that name, found on its PATH when it
// starts, as the prestart hook of `docker run --gpus`), the link
// wsl-gpu-runtime (the binary as an OCI runtime) and the runtime
// "wsl-gpu" in daemon.json for `docker run --runtime wsl-gpu`.
//
// Install refuses, changing nothing, when a nvidia-container-runtime-hook
// that is not a link to the hook binary is in BinDir or anywhere on
// dockerd's default PATH: NVIDIA's toolkit owns that name, and shadowing
// it would break the toolkit's own GPU support. Uninstall removes the
// runtime entry, and the links only while they still point at HookPath.
func Docker(o Options, uninstall bool) (*Plan, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	p := &Plan{Next: "restart dockerd so it finds nvidia-container-runtime-hook on its PATH and reads daemon.json: systemctl restart docker"}
	if uninstall {
		p.Next = "restart dockerd so it forgets the hook and the wsl-gpu runtime: systemctl restart docker"
	}
	var errs []error
	for _, name := range []string{nvidiaHook, wrapperName} {
		c, err := planLink(o, name, uninstall)
		if err != nil {
			errs = append(errs, err)
		} else if c != nil {
			p.Changes = append(p.Changes, *c)
		}
	}
	if !uninstall {
		if err := foreignHookOnPath(o); err != nil {
			errs = append(errs, err)
		}
		if !slices.Contains(filepath.SplitList(daemonPATH), filepath.Clean(o.BinDir)) {
			p.Warnings = append(p.Warnings, fmt.Sprintf("%s is not on the PATH systemd gives dockerd (%s): --gpus will not find the hook unless docker.service sets a PATH that includes it", o.BinDir, daemonPATH))
		}
	}

	old, err := readOptional(o, daemonJSON)
	if err != nil {
		errs = append(errs, err)
	} else {
		var updated []byte
		if uninstall {
			var other string
			updated, other, err = removeDockerRuntime(daemonJSON, old, filepath.Join(o.BinDir, wrapperName))
			if other != "" {
				p.Warnings = append(p.Warnings, fmt.Sprintf("%s: the %s runtime runs %s, another wsl-gpu-hook's, and stays: uninstall docker with that one, or remove it by hand", daemonJSON, runtimeName, other))
			}
		} else {
			updated, err = addDockerRuntime(daemonJSON, old, filepath.Join(o.BinDir, wrapperName))
		}
		switch {
		case err != nil:
			errs = append(errs, err)
		case !bytes.Equal(old, updated):
			p.Changes = append(p.Changes, Change{Path: daemonJSON, Old: old, New: updated})
		}
	}
	if len(errs) > 0 {
		return nil, refuse(errs)
	}
	return p, nil
}

// refuse is the error of a plan that could not be made.
func refuse(errs []error) error {
	return fmt.Errorf("%w; nothing was changed", errors.Join(errs...))
}

// planLink plans BinDir/name -> HookPath. A name that exists and is not a
// link to HookPath belongs to someone else: install refuses it, uninstall
// leaves it.
func planLink(o Options, name string, uninstall bool) (*Change, error) {
	p := filepath.Join(o.BinDir, name)
	fi, err := os.Lstat(o.path(p))
	if errors.Is(err, fs.ErrNotExist) {
		if uninstall {
			return nil, nil
		}
		return &Change{Path: p, Link: o.HookPath}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("inspect %s: %w", p, err)
	}
	var target string
	if fi.Mode()&fs.ModeSymlink != 0 {
		if target, err = os.Readlink(o.path(p)); err != nil {
			return nil, fmt.Errorf("inspect %s: %w", p, err)
		}
	}
	ours := target != "" && linksTo(p, target, o.HookPath)
	switch {
	case ours && uninstall && o.owner(p) != "":
		// The package's link: removing it would break the package.
		return nil, nil
	case ours && uninstall:
		return &Change{Path: p, Link: target, Remove: true}, nil
	case ours, uninstall:
		return nil, nil
	}
	return nil, foreign(p, target)
}

// foreign says why an existing name cannot become the hook.
// target is the link's target, "" when p is not a link.
func foreign(p, target string) error {
	switch {
	case filepath.Base(target) == wsl.HookName:
		return fmt.Errorf("%s links to another wsl-gpu-hook (%s): uninstall that one first with `%s uninstall docker`", p, target, target)
	case filepath.Base(p) == nvidiaHook:
		return fmt.Errorf("%s is NVIDIA's nvidia-container-toolkit hook: remove the toolkit or use `wsl-gpu-hook install cdi` instead", p)
	}
	return fmt.Errorf("%s exists and is not a link to wsl-gpu-hook: remove it, or install wsl-gpu-hook into another directory", p)
}

// linksTo reports whether the symlink at p with the given target resolves
// (one level) to want.
func linksTo(p, target, want string) bool {
	if !filepath.IsAbs(target) {
		target = filepath.Join(filepath.Dir(p), target)
	}
	return filepath.Clean(target) == filepath.Clean(want)
}

// foreignHookOnPath finds a nvidia-container-runtime-hook outside BinDir
// that dockerd could run instead of, or shadowed by, ours.
func foreignHookOnPath(o Options) error {
	for _, dir := range filepath.SplitList(daemonPATH) {
		if dir == filepath.Clean(o.BinDir) {
			continue // planLink's business
		}
		p := filepath.Join(dir, nvidiaHook)
		fi, err := os.Lstat(o.path(p))
		if err != nil {
			continue
		}
		var target string
		if fi.Mode()&fs.ModeSymlink != 0 {
			target, _ = os.Readlink(o.path(p))
			if linksTo(p, target, o.HookPath) {
				continue // ours, made with another BinDir
			}
		}
		return foreign(p, target)
	}
	return nil
}

// addDockerRuntime returns daemon.json with runtimes["wsl-gpu"] =
// {"path": wrapper}. An entry already there with that path is left as it
// is (runtimeArgs the operator added survive); with another path its value
// is replaced.
func addDockerRuntime(name string, data []byte, wrapper string) ([]byte, error) {
	leaf := []jsonKV{{"path", wrapper}}
	if len(bytes.TrimSpace(data)) == 0 {
		// Missing, or empty, which dockerd also reads as no settings.
		data = []byte("{}\n")
	}
	d, err := parseJSONDoc(name, data)
	if err != nil {
		return nil, err
	}
	top := d.style(d.top, nil)
	rt, ok, err := d.lookup(d.top, "runtimes", true)
	if err != nil {
		return nil, err
	}
	if !ok {
		return d.insertFirst(d.top, top, "runtimes", []jsonKV{{runtimeName, leaf}}), nil
	}
	runtimes, err := d.runtimes(rt)
	if err != nil {
		return nil, err
	}
	style := d.style(runtimes, &top)
	m, ok, err := d.lookup(runtimes, runtimeName, false)
	if err != nil {
		return nil, err
	}
	if !ok {
		return d.insertFirst(runtimes, style, runtimeName, leaf), nil
	}
	var have struct {
		Path string `json:"path"`
	}
	if json.Unmarshal(data[m.valueStart:m.valueEnd], &have) == nil && have.Path == wrapper {
		return data, nil
	}
	return d.replaceValue(m, style, leaf), nil
}

// removeDockerRuntime returns daemon.json without runtimes["wsl-gpu"],
// and without "runtimes" when nothing else is left in it. An entry whose
// path is not wrapper is another wsl-gpu-hook's (the package's beside a
// tarball's), which still works: it stays, and its path is returned.
func removeDockerRuntime(name string, data []byte, wrapper string) ([]byte, string, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return data, "", nil
	}
	d, err := parseJSONDoc(name, data)
	if err != nil {
		return nil, "", err
	}
	rt, ok, err := d.lookup(d.top, "runtimes", true)
	if err != nil || !ok {
		return data, "", err
	}
	runtimes, err := d.runtimes(rt)
	if err != nil {
		return nil, "", err
	}
	m, ok, err := d.lookup(runtimes, runtimeName, false)
	if err != nil || !ok {
		return data, "", err
	}
	var have struct {
		Path string `json:"path"`
	}
	if json.Unmarshal(data[m.valueStart:m.valueEnd], &have) != nil || have.Path != wrapper {
		if have.Path == "" {
			have.Path = "(no path)"
		}
		return data, have.Path, nil
	}
	if len(runtimes.members) == 1 {
		return d.removeMember(d.top, slices.IndexFunc(d.top.members, func(m jsonMember) bool { return m.keyStart == rt.keyStart })), "", nil
	}
	i := slices.IndexFunc(runtimes.members, func(m jsonMember) bool { return m.key == runtimeName })
	return d.removeMember(runtimes, i), "", nil
}

// runtimes parses the value of the "runtimes" member.
func (d *jsonDoc) runtimes(rt jsonMember) (jsonObject, error) {
	if d.data[rt.valueStart] != '{' {
		line, _ := lineCol(d.data, rt.valueStart)
		return jsonObject{}, fmt.Errorf("%s:%d: \"runtimes\" is %s, not an object: fix the file by hand", d.name, line, jsonKind(d.data[rt.valueStart]))
	}
	return d.object(rt.valueStart)
}

// jsonKind names the kind of the JSON value that starts with c.
func jsonKind(c byte) string {
	switch c {
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 'n':
		return "null"
	case 't', 'f':
		return "a boolean"
	}
	return "a number"
}
