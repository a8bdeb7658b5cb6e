package driver

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/kube/dra"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/atomicfile"
)

// ensureFile makes path (a claim's spec or metadata file) hold data,
// written atomically only when it does not already. It returns what path
// held instead ("" when it held data).
func ensureFile(path string, data []byte) (string, error) {
	cur, err := dra.ReadSpec(path)
	var was string
	switch {
	case err == nil && bytes.Equal(cur, data):
		return "", nil
	case err == nil:
		was = "not what the checkpoint holds"
	case errors.Is(err, fs.ErrNotExist):
		was = "missing"
	default:
		was = err.Error()
	}
	if err := atomicfile.Write(path, data, 0o644, atomicfile.Keep); err != nil {
		return was, err
	}
	return was, nil
}

// healLocked makes every prepared claim's spec file and metadata files
// hold what the checkpoint says prepare wrote, one line per file it
// rewrites. The kubelet prepares a claim once per pod and never again
// while the pod runs, so a file deleted or changed under a running pod (a
// cleanup, an operator, a tmpfs /var/run after a node reboot with pods
// kept) would fail every later start of its containers as an
// unresolvable CDI device or a missing mount source. Files of names the
// checkpoint does not record are not touched.
func (d *Driver) healLocked() {
	d.upgradeLocked()
	for _, uid := range slices.Sorted(maps.Keys(d.cp.Claims)) {
		p := d.cp.Claims[uid]
		if p.Spec == nil {
			continue // a version 1 claim not completed yet
		}
		claim := p.Namespace + "/" + p.Name
		var failed []string
		for _, f := range d.claimFiles(uid, p) {
			was, err := "", f.err
			if err == nil {
				was, err = f.ensure()
			}
			switch {
			case err != nil:
				// Once per distinct failure: the re-list comes every
				// few seconds.
				key := f.path + ": " + failure(was, err)
				failed = append(failed, key)
				if !slices.Contains(d.healErr[uid], key) {
					d.cfg.Log.Error("rewrite claim "+f.what, "claim", claim, "uid", uid, "file", f.path, "was", was, "err", err)
				}
			case was != "":
				d.cfg.Log.Info("rewrote claim "+f.what, "claim", claim, "uid", uid, "file", f.path, "was", was)
			}
		}
		if failed == nil {
			delete(d.healErr, uid)
		} else {
			d.healErr[uid] = failed
		}
	}
}

// claimFile is a file a prepared claim needs on the node, and what it
// holds (err when that cannot be said).
type claimFile struct {
	what, desc string // spec or metadata, for the log and in errors
	path       string
	data       []byte
	err        error
}

// ensure is ensureFile for f, its error saying which file it is.
func (f claimFile) ensure() (string, error) {
	was, err := ensureFile(f.path, f.data)
	if err != nil {
		return was, fmt.Errorf("write %s: %w", f.desc, err)
	}
	return was, nil
}

// claimFiles are the claim's spec and metadata files as p records them.
func (d *Driver) claimFiles(uid string, p dra.Prepared) []claimFile {
	spec, err := p.SpecData()
	files := []claimFile{{"spec", "CDI spec", filepath.Join(d.cfg.CDIDir, p.SpecFile), spec, err}}
	for _, req := range slices.Sorted(maps.Keys(p.Metadata)) {
		files = append(files, claimFile{what: "metadata", desc: "device metadata", path: dra.MetadataFile(d.cfg.MetadataDir, uid, req), data: []byte(p.Metadata[req])})
	}
	return files
}

// failure is what tells one failure to heal a claim from another: the
// errno rather than the message, which names a new temporary file each
// time.
func failure(was string, err error) string {
	var errno unix.Errno
	if errors.As(err, &errno) {
		return was + ": " + errno.Error()
	}
	return was + ": " + err.Error()
}

// upgradeLocked completes the claims of a version 1 checkpoint, which
// recorded no spec: with the spec its file holds when that is the claim's
// (what its pods were given), else with the one prepare writes now (once
// the host could be listed), and saves the checkpoint in the current
// version.
func (d *Driver) upgradeLocked() {
	changed := false
	for _, uid := range slices.Sorted(maps.Keys(d.cp.Claims)) {
		p := d.cp.Claims[uid]
		if p.Spec != nil {
			continue
		}
		path := filepath.Join(d.cfg.CDIDir, p.SpecFile)
		data, err := dra.ReadSpec(path)
		if err == nil {
			var up dra.Prepared
			if up, err = dra.AdoptSpec(uid, p, data); err == nil {
				d.cfg.Log.Info("checkpoint version 1: recorded the claim's spec as its file holds it", "claim", p.Namespace+"/"+p.Name, "uid", uid, "file", path)
				d.cp.Claims[uid], changed = up, true
				continue
			}
		}
		if d.inv == nil {
			continue
		}
		up, rerr := dra.RebuildSpec(uid, p, d.inv, d.cfg.Spec)
		if rerr != nil {
			if key := failure("", rerr); !slices.Contains(d.healErr[uid], key) {
				d.healErr[uid] = []string{key}
				d.cfg.Log.Error("checkpoint version 1: rebuild the claim's spec", "claim", p.Namespace+"/"+p.Name, "uid", uid, "err", rerr)
			}
			continue
		}
		d.cfg.Log.Info("checkpoint version 1: rebuilt the claim's spec for the host as listed now", "claim", p.Namespace+"/"+p.Name, "uid", uid, "file", path, "because", err)
		d.cp.Claims[uid], changed = up, true
	}
	if changed {
		if err := d.cp.Save(d.cfg.Checkpoint); err != nil {
			d.cfg.Log.Error(err.Error())
		}
	}
}
