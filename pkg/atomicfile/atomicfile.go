// Package atomicfile replaces files so that a reader (a runtime reading a
// bundle's config.json, an engine reading its configuration) and a crash
// see the old content or the new one, never a mix.
package atomicfile

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Owner is a file's uid and gid; -1 keeps what the new file was created with.
type Owner struct{ UID, GID int }

// Keep leaves the new file owned by whoever writes it.
var Keep = Owner{-1, -1}

// OwnerOf is the owner of an existing file.
func OwnerOf(fi fs.FileInfo) Owner {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return Owner{int(st.Uid), int(st.Gid)}
	}
	return Keep
}

// Write replaces path with data, mode and owner: a temporary file in the
// same directory (created with the directories on the way), synced, renamed
// over path, and the directory synced.
func Write(path string, data []byte, mode fs.FileMode, owner Owner) (err error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".wsl-gpu-hook-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err := f.Write(data); err != nil {
		return err
	}
	// Chmod, as CreateTemp's 0600 and the umask are not what was asked.
	if err := f.Chmod(mode); err != nil {
		return err
	}
	if (owner.UID >= 0 && owner.UID != os.Getuid()) || (owner.GID >= 0 && owner.GID != os.Getgid()) {
		if err := f.Chown(owner.UID, owner.GID); err != nil {
			return err
		}
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return err
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync() // best effort: the rename is done either way
		d.Close()
	}
	return nil
}

// Replace rewrites the existing file path with data, keeping its mode and
// owner.
func Replace(path string, data []byte) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	return Write(path, data, fi.Mode().Perm(), OwnerOf(fi))
}
