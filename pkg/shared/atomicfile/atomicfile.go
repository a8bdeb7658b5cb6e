// Package atomicfile replaces files so that a reader (a runtime reading a
// bundle's config.json, an engine reading its configuration, a container's
// loader reading its cache) and a crash see the old content or the new one,
// never a mix, and so that a writer killed at any point leaves nothing in
// the way of the next write.
//
// The content goes to an unnamed file in the target's directory (O_TMPFILE),
// made whole (written, its mode and owner set, synced when asked) before it
// gets a name: linked at the target when nothing is there, else linked at a
// temporary name and renamed over the target. A writer killed before the
// link leaves nothing; one killed between the link and the rename leaves
// that one file, named "." + name + ".wsl-gpu-hook-" + 16 random hex
// digits, which nothing reads and no later write trips over. Where the file
// system has no O_TMPFILE (overlayfs before Linux 6.6), the file is created
// under such a name with O_EXCL instead, and a killed write leaves it.
// Temporary names are random, never the pid: a container's hook has the
// same pid at every start in the container's fresh pid namespace.
//
// A link at the target is replaced, never followed; a directory there fails
// the write.
package atomicfile

import (
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
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

// Write replaces path with data, mode and owner, creating the directories
// on the way, and syncs the file and the directory: what it wrote survives
// a crash of the machine too.
func Write(path string, data []byte, mode fs.FileMode, owner Owner) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	d, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &fs.PathError{Op: "open", Path: dir, Err: err}
	}
	defer unix.Close(d)
	w := writer{mode: mode, owner: owner, sync: true, tmpfile: true}
	if err := w.write(d, filepath.Base(path), data); err != nil {
		return withDir(err, dir)
	}
	unix.Fsync(d) // best effort: the rename is done either way
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

// WriteAt replaces name in the directory open at dir (a descriptor, O_PATH
// will do) with data and mode, owned by whoever writes it, without syncing:
// the hook's writes into a container, whose root filesystem is resolved
// once, as a descriptor, and never again by path. Errors are
// *fs.PathError naming name.
func WriteAt(dir int, name string, data []byte, mode fs.FileMode) error {
	return writer{mode: mode, owner: Keep, tmpfile: true}.write(dir, name, data)
}

// writer is how a file is written; tmpfile false writes as on a file
// system without O_TMPFILE.
type writer struct {
	mode    fs.FileMode
	owner   Owner
	sync    bool
	tmpfile bool
}

// tempAttempts bounds the temporary names tried: another file with a
// random 64-bit name is a hostile image's doing, and only a few can be.
const tempAttempts = 16

func (w writer) write(dir int, name string, data []byte) error {
	fd, err := -1, error(unix.EOPNOTSUPP)
	if w.tmpfile {
		fd, err = unix.Openat(dir, ".", unix.O_TMPFILE|unix.O_WRONLY|unix.O_CLOEXEC, 0o600)
	}
	if noTmpfile(err) {
		return w.writeNamed(dir, name, data)
	}
	if errors.Is(err, unix.EPERM) && removed(dir) {
		// What O_TMPFILE says in a directory removed meanwhile; a named
		// create there says ENOENT, which callers know.
		err = unix.ENOENT
	}
	if err != nil {
		return &fs.PathError{Op: "create", Path: name, Err: err}
	}
	defer unix.Close(fd)
	if err := w.fill(fd, name, data); err != nil {
		return err
	}
	// Nothing there (usually): the file appears whole under its name.
	err = linkAt(fd, dir, name)
	if !errors.Is(err, unix.EEXIST) {
		if err != nil {
			return &fs.PathError{Op: "link", Path: name, Err: err}
		}
		return nil
	}
	for range tempAttempts {
		tmp := tempName(name)
		switch err := linkAt(fd, dir, tmp); {
		case errors.Is(err, unix.EEXIST):
			continue
		case err != nil:
			return &fs.PathError{Op: "link", Path: tmp, Err: err}
		}
		return renameOver(dir, tmp, name)
	}
	return &fs.PathError{Op: "link", Path: name, Err: unix.EEXIST}
}

// writeNamed writes through a file created under a temporary name: for a
// file system without O_TMPFILE.
func (w writer) writeNamed(dir int, name string, data []byte) error {
	for range tempAttempts {
		tmp := tempName(name)
		fd, err := unix.Openat(dir, tmp, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if errors.Is(err, unix.EEXIST) {
			continue
		}
		if err != nil {
			return &fs.PathError{Op: "create", Path: tmp, Err: err}
		}
		err = w.fill(fd, tmp, data)
		unix.Close(fd)
		if err != nil {
			unix.Unlinkat(dir, tmp, 0)
			return err
		}
		return renameOver(dir, tmp, name)
	}
	return &fs.PathError{Op: "create", Path: name, Err: unix.EEXIST}
}

// fill writes data to fd and gives it its mode (which the umask may have
// narrowed at the create) and owner, and syncs it when asked.
func (w writer) fill(fd int, name string, data []byte) error {
	op := "write"
	err := writeAll(fd, data)
	if err == nil {
		op, err = "chmod", unix.Fchmod(fd, uint32(w.mode.Perm()))
	}
	if err == nil && ((w.owner.UID >= 0 && w.owner.UID != os.Getuid()) || (w.owner.GID >= 0 && w.owner.GID != os.Getgid())) {
		op, err = "chown", unix.Fchown(fd, w.owner.UID, w.owner.GID)
	}
	if err == nil && w.sync {
		op, err = "sync", unix.Fsync(fd)
	}
	if err != nil {
		return &fs.PathError{Op: op, Path: name, Err: err}
	}
	return nil
}

// renameOver renames tmp over name in dir, removing tmp if that fails.
func renameOver(dir int, tmp, name string) error {
	if err := unix.Renameat(dir, tmp, dir, name); err != nil {
		unix.Unlinkat(dir, tmp, 0)
		return &fs.PathError{Op: "rename", Path: name, Err: err}
	}
	return nil
}

// linkAt gives the unnamed file fd the name name in dir. Before Linux
// 6.10, linking a descriptor itself (AT_EMPTY_PATH) needs
// CAP_DAC_READ_SEARCH in the initial user namespace, which a hook in a
// container's own user namespace lacks (ENOENT); it links through the
// descriptor's /proc entry then, as open(2) describes for O_TMPFILE.
// linkat never follows a link at name: EEXIST.
func linkAt(fd, dir int, name string) error {
	err := unix.Linkat(fd, "", dir, name, unix.AT_EMPTY_PATH)
	if errors.Is(err, unix.ENOENT) {
		err = unix.Linkat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(fd), dir, name, unix.AT_SYMLINK_FOLLOW)
	}
	return err
}

// noTmpfile reports an open error that says the file system (or the
// kernel) has no O_TMPFILE: EOPNOTSUPP, or EISDIR and EINVAL from kernels
// that predate it and read the flag as O_DIRECTORY.
func noTmpfile(err error) bool {
	return errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EISDIR) || errors.Is(err, unix.EINVAL)
}

// removed reports whether the directory open at dir has been removed.
func removed(dir int) bool {
	var st unix.Stat_t
	return unix.Fstat(dir, &st) == nil && st.Nlink == 0
}

// tempName is a temporary name for name that no other writer picks: the
// runtime's generator is seeded from the kernel's, and costs no system
// call.
func tempName(name string) string {
	return "." + name + ".wsl-gpu-hook-" + strconv.FormatUint(rand.Uint64()|1<<63, 16)
}

// writeAll writes data to fd whole.
func writeAll(fd int, data []byte) error {
	for len(data) > 0 {
		n, err := unix.Write(fd, data)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return err
		}
		data = data[n:]
	}
	return nil
}

// withDir puts dir into a *fs.PathError's path, for the callers that name
// a whole path.
func withDir(err error, dir string) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return &fs.PathError{Op: pe.Op, Path: filepath.Join(dir, pe.Path), Err: pe.Err}
	}
	return err
}
