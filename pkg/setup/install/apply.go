package install

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/atomicfile"
)

// Apply carries out p under o.Prefix, in order. Before each step it checks
// that the file or link is still as planned, so a plan printed by a dry
// run and applied later cannot overwrite an edit made in between. If a
// step fails, the steps already done are undone and the error says
// whether that worked.
func Apply(o Options, p *Plan) error {
	var done []func() error
	for _, c := range p.Changes {
		undo, err := applyChange(o, c)
		if err == nil {
			done = append(done, undo)
			continue
		}
		var undoErrs []error
		for i := len(done) - 1; i >= 0; i-- {
			if uerr := done[i](); uerr != nil {
				undoErrs = append(undoErrs, uerr)
			}
		}
		if len(undoErrs) > 0 {
			return fmt.Errorf("%w; undoing the earlier changes failed too: %w", err, errors.Join(undoErrs...))
		}
		if len(done) > 0 {
			return fmt.Errorf("%w; the earlier changes were undone", err)
		}
		return err
	}
	return nil
}

// applyChange makes one change and returns how to take it back.
func applyChange(o Options, c Change) (func() error, error) {
	if c.Link != "" {
		return applyLink(o, c)
	}
	full, err := realPath(o, c.Path)
	if err != nil {
		return nil, err
	}
	cur, err := readOptional(Options{}, full)
	if err != nil {
		return nil, err
	}
	if (cur == nil) != (c.Old == nil) || !bytes.Equal(cur, c.Old) {
		return nil, fmt.Errorf("%s changed since it was planned: run the command again", c.Path)
	}
	mode, owner := fs.FileMode(0o644), atomicfile.Keep
	if fi, err := os.Stat(full); err == nil {
		mode, owner = fi.Mode().Perm(), atomicfile.OwnerOf(fi)
	}
	if c.Old != nil {
		if err := atomicfile.Write(o.path(c.Backup()), c.Old, mode, owner); err != nil {
			return nil, fmt.Errorf("back up %s: %w", c.Path, err)
		}
	}
	restore := func() error {
		if c.Old == nil {
			return removeFile(full)
		}
		return atomicfile.Write(full, c.Old, mode, owner)
	}
	if c.Remove || c.New == nil {
		return restore, removeFile(full)
	}
	if err := atomicfile.Write(full, c.New, mode, owner); err != nil {
		return nil, fmt.Errorf("write %s: %w", c.Path, err)
	}
	return restore, nil
}

// applyLink makes or removes a symlink. A new link appears atomically: it
// is made under a temporary name and renamed.
func applyLink(o Options, c Change) (func() error, error) {
	full := o.path(c.Path)
	target, err := os.Readlink(full)
	exists := !errors.Is(err, fs.ErrNotExist)
	if c.Remove {
		if err != nil || target != c.Link {
			return nil, fmt.Errorf("%s changed since it was planned: run the command again", c.Path)
		}
		if err := os.Remove(full); err != nil {
			return nil, fmt.Errorf("remove %s: %w", c.Path, err)
		}
		return func() error { return symlinkAtomic(c.Link, full) }, nil
	}
	if exists {
		return nil, fmt.Errorf("%s appeared since it was planned: run the command again", c.Path)
	}
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", filepath.Dir(c.Path), err)
	}
	if err := symlinkAtomic(c.Link, full); err != nil {
		return nil, fmt.Errorf("link %s: %w", c.Path, err)
	}
	return func() error { return removeFile(full) }, nil
}

func symlinkAtomic(target, full string) error {
	tmp := fmt.Sprintf("%s.wsl-gpu-hook-%d.tmp", full, os.Getpid())
	if err := os.Symlink(target, tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, full); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

func removeFile(full string) error {
	if err := os.Remove(full); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// realPath is where the file at system path p is written: a symlinked
// configuration file (e.g. daemon.json kept elsewhere by configuration
// management) is written through, not replaced by a regular file.
// Absolute link targets are taken under o.Prefix.
func realPath(o Options, p string) (string, error) {
	full := o.path(p)
	for range 40 {
		target, err := os.Readlink(full)
		if err != nil {
			return full, nil // not a link, or missing: write it here
		}
		if filepath.IsAbs(target) {
			full = o.path(target)
		} else {
			full = filepath.Join(filepath.Dir(full), target)
		}
	}
	return "", fmt.Errorf("%s: too many levels of symbolic links", p)
}
