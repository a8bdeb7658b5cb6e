package dra

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/smallfile"
)

// maxSpec bounds how much of a file at a claim's spec name is read: a
// claim's spec is a few kilobytes; anything longer is not one.
const maxSpec = 1 << 20

// ErrNotRegular is a claim's spec path that holds something other than a
// regular file (a directory, a symlink, a FIFO).
var ErrNotRegular = errors.New("not a regular file")

// ReadSpec reads the file at a claim's spec path without following a
// symlink or blocking on a FIFO: anything but a regular file of at most
// 1 MiB is an error (ErrNotRegular, smallfile.ErrTooLarge).
func ReadSpec(path string) ([]byte, error) {
	data, err := smallfile.ReadVetted(path, maxSpec, unix.O_NOFOLLOW|unix.O_NONBLOCK, func(st *unix.Stat_t) error {
		if st.Mode&unix.S_IFMT != unix.S_IFREG {
			return ErrNotRegular
		}
		return nil
	})
	if errors.Is(err, unix.ELOOP) {
		return nil, ErrNotRegular
	}
	return data, err
}

// RemoveSpec removes a claim spec the driver wrote: a regular file whose
// kind is the claims' kind. Anything else at that path is left alone, and
// said so; a missing file is not an error.
func RemoveSpec(path string) error {
	data, err := ReadSpec(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case errors.Is(err, ErrNotRegular):
		return fmt.Errorf("%s is not a regular file: not removing what the driver did not write", path)
	case errors.Is(err, smallfile.ErrTooLarge):
		return fmt.Errorf("%s is not a %s spec: not removing what the driver did not write", path, CDIKind)
	case err != nil:
		return err
	}
	var spec struct {
		Kind string `json:"kind"`
	}
	if json.Unmarshal(data, &spec) != nil || spec.Kind != CDIKind {
		return fmt.Errorf("%s is not a %s spec: not removing what the driver did not write", path, CDIKind)
	}
	return os.Remove(path)
}

// RemoveMetadata removes the metadata files of the claim uid from dir
// (the driver's own: nothing else lives there). A missing dir is not an
// error.
func RemoveMetadata(dir, uid string) error {
	if err := ValidUID(uid); err != nil {
		return err
	}
	return os.RemoveAll(filepath.Join(dir, uid))
}

// RemoveAll removes what the driver wrote on the node, for an uninstall
// (never for a mere stop: the pods that run keep their claims): every
// file in cdiDir of a claim spec's name and kind, which covers every spec
// the checkpoint records (it holds no other name) and any a lost
// checkpoint forgot, the claims' metadata dir, the checkpoint and its
// moved-aside copies. It needs no readable checkpoint, goes on past a
// failure and returns them all.
func RemoveAll(cdiDir, metadataDir, checkpoint string) error {
	var errs []error
	entries, err := os.ReadDir(cdiDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, err)
	}
	prefix, _ := strings.CutSuffix(SpecFile("x"), "x.json")
	for _, e := range entries {
		if name := e.Name(); strings.HasPrefix(name, prefix) && strings.HasSuffix(name, ".json") {
			errs = append(errs, RemoveSpec(filepath.Join(cdiDir, name)))
		}
	}
	errs = append(errs, os.RemoveAll(metadataDir))
	copies, err := corruptCopies(checkpoint)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, err)
	}
	for _, path := range append(copies, checkpoint) {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
