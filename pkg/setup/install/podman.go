package install

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"regexp"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/wsl"
)

// Podman plans podman's (and CRI-O's) hooks.d file. hooks.d can match a
// container by annotation but not by environment, so the hook runs only
// for containers started with the request annotation, e.g.
// `podman run --annotation wsl-gpu-hook/devices=all`.
//
// An existing file of that name is replaced only if it is valid JSON (a
// broken one is refused, as the operator may be editing it); uninstall
// removes it only while its hook path is HookPath.
func Podman(o Options, uninstall bool) (*Plan, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	p := &Plan{Next: fmt.Sprintf("nothing to restart: podman reads hooks.d for every container; ask with --annotation %s=all", o.annotation())}
	if uninstall {
		p.Next = "nothing to restart: podman reads hooks.d for every container"
	}
	// The hooks.d file in /usr/share is the package's when a package
	// installed it; the admin's override of the same name in /etc masks it.
	file := hooksDFile
	pkg := o.owner(hooksDFile)
	if pkg != "" {
		file = hooksDAdmin
	}
	old, err := readOptional(o, file)
	if err != nil {
		return nil, refuse([]error{err})
	}
	var have struct {
		Hook struct {
			Path string `json:"path"`
		} `json:"hook"`
	}
	if old != nil {
		if _, err := parseJSONDoc(file, old); err != nil {
			return nil, refuse([]error{err})
		}
		_ = json.Unmarshal(old, &have) // the shape is checked by parseJSONDoc; a field of another type reads as not ours
	}
	if uninstall {
		if old != nil && have.Hook.Path == o.HookPath {
			p.Changes = append(p.Changes, Change{Path: file, Old: old})
		}
		if pkg != "" {
			p.Warnings = append(p.Warnings, fmt.Sprintf("%s belongs to the package %s and stays: apt-get remove %s removes it", hooksDFile, pkg, pkg))
		}
		return p, nil
	}
	want := HooksD(o.HookPath, o.annotation())
	if pkg != "" {
		pkgFile, err := readOptional(o, hooksDFile)
		if err != nil {
			return nil, refuse([]error{err})
		}
		if bytes.Equal(pkgFile, want) && old == nil {
			return p, nil // the package's file is what install would write
		}
	} else if _, err := os.Lstat(o.path(hooksDAdmin)); err == nil {
		p.Warnings = append(p.Warnings, fmt.Sprintf("%s exists and masks %s: podman runs the one in /etc", hooksDAdmin, hooksDFile))
	}
	if !bytes.Equal(old, want) {
		p.Changes = append(p.Changes, Change{Path: file, Old: old, New: want})
	}
	return p, nil
}

// HooksD is the hooks.d file (oci-hooks(5), schema 1.0.0) that runs the
// hook at hookPath as a prestart hook of every container that has the
// annotation with a non-empty value.
func HooksD(hookPath, annotation string) []byte {
	type hook struct {
		Path string   `json:"path"`
		Args []string `json:"args"`
	}
	type when struct {
		Annotations map[string]string `json:"annotations"`
	}
	data, _ := json.MarshalIndent(struct { // plain strings and maps always marshal
		Version string   `json:"version"`
		Hook    hook     `json:"hook"`
		When    when     `json:"when"`
		Stages  []string `json:"stages"`
	}{
		Version: "1.0.0",
		Hook:    hook{Path: hookPath, Args: []string{wsl.HookName, "prestart"}},
		When:    when{Annotations: map[string]string{"^" + regexp.QuoteMeta(annotation) + "$": ".+"}},
		Stages:  []string{"prestart"},
	}, "", "  ")
	return append(data, '\n')
}
