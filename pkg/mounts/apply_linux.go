package mounts

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/ldcache"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/wsl"
)

// glibcLoader is where every x86_64 glibc image keeps its dynamic loader
// (the path is in every binary's PT_INTERP, so images cannot move it).
const glibcLoader = "/lib64/ld-linux-x86-64.so.2"

// maxCacheSize bounds the image's ld.so.cache the hook reads; a Debian
// cache is ~20 KiB, a large distro's a few MiB.
const maxCacheSize = 64 << 20

// Apply carries out steps inside the root filesystem at rootfs. It must run
// in the container's mount namespace (see nsenter). On error everything it
// did is undone before it returns.
func Apply(rootfs string, steps []Step, log logrus.FieldLogger) (err error) {
	root, err := os.OpenFile(rootfs, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open container rootfs: %w", err)
	}
	defer root.Close()

	a := &applier{root: root, log: log, dirs: map[string]*os.File{}}
	defer func() {
		if err != nil {
			a.rollback()
		}
		for _, d := range a.dirs {
			d.Close()
		}
		for _, fd := range a.fds {
			unix.Close(fd)
		}
	}()
	glibc := a.exists(glibcLoader)
	for _, s := range steps {
		if s.NeedsGlibc && !glibc {
			log.Warnf("skip %s: the image has no glibc loader (%s), so the libraries are not registered with the loader: programs in it need LD_LIBRARY_PATH=%s", s.Target, glibcLoader, ContainerLibDir)
			continue
		}
		log.Debugf("apply %s", s)
		if err := a.apply(s); err != nil {
			return err
		}
	}
	return nil
}

// applier keeps what has been done so it can be undone.
type applier struct {
	root *os.File
	log  logrus.FieldLogger
	undo []func() error
	// dirs holds the parent directories already resolved, by container
	// path: each is resolved in the rootfs once per Apply, and later steps
	// use the same directory even if the image swaps a link meanwhile.
	dirs map[string]*os.File
	// fds are the descriptors the undo actions use.
	fds []int
}

func (a *applier) rollback() {
	for i := len(a.undo) - 1; i >= 0; i-- {
		if err := a.undo[i](); err != nil {
			a.log.Errorf("undo: %v", err)
		}
	}
}

func (a *applier) exists(unsafePath string) bool {
	f, err := openInRoot(a.root, unsafePath, unix.O_PATH)
	if err != nil {
		return false
	}
	f.Close()
	return true
}

func (a *applier) apply(s Step) error {
	var err error
	var op Op
	switch s.Kind {
	case Device:
		op, err = a.device(s)
	case Bind:
		op, err = a.bind(s)
	case BindFile:
		op, err = a.bindFile(s)
	case File:
		op, err = a.writeFile(s.Target, func([]byte) ([]byte, error) { return s.Data, nil })
	case Ldcache:
		op, err = a.writeFile(s.Target, func(old []byte) ([]byte, error) {
			data, err := ldcache.Merge(old, s.Entries)
			if errors.Is(err, ldcache.ErrFormat) {
				// glibc ignores a cache it cannot read; one with only our
				// entries is strictly better, and the loader still
				// searches its default directories for the rest.
				a.log.Warnf("replace the image's unreadable %s (%v) with one holding the WSL libraries", s.Target, err)
				return ldcache.Merge(nil, s.Entries)
			}
			return data, err
		})
	case Symlink:
		op, err = a.symlink(s)
	default:
		op, err = OpPlan, fmt.Errorf("unknown step kind %q", s.Kind)
	}
	if err != nil {
		return newError(s, op, err)
	}
	return nil
}

// wslDirs are the folders the WSL layout owns: whatever an image has at
// these paths (a symlink, a file) is replaced by a real directory, as a
// mount point is; paths outside them are the image's and are followed,
// confined to the rootfs.
var wslDirs = []string{wsl.Dir, ContainerDriversDir}

// parent returns a handle on the directory that holds target, creating the
// directories on the way, all confined to the rootfs. The handle belongs to
// the applier: callers must not close it.
func (a *applier) parent(target string) (*os.File, string, error) {
	dir, base := path.Split(target)
	if base == "" || base == "." || base == ".." {
		return nil, "", fmt.Errorf("bad target %q", target)
	}
	if d, ok := a.dirs[dir]; ok {
		return d, base, nil
	}
	// A WSL-owned directory is claimed from its parent's handle: no
	// resolution from the root, which costs procfs round trips each time.
	if slices.Contains(wslDirs, strings.TrimSuffix(dir, "/")) {
		d, err := a.claimDir(strings.TrimSuffix(dir, "/"))
		return d, base, err
	}
	for _, w := range wslDirs { // shallow first
		if strings.HasPrefix(dir, w+"/") {
			if _, err := a.claimDir(w); err != nil {
				return nil, "", err
			}
		}
	}
	d, err := mkdirAllInRoot(a.root, dir)
	if err != nil {
		return nil, "", err
	}
	a.dirs[dir] = d
	return d, base, nil
}

// claimDir makes sure the WSL-owned directory p is a real directory and
// returns a handle on it, kept with the others parent resolved. Its parent
// is resolved once; p itself is never followed if it is a link.
func (a *applier) claimDir(p string) (*os.File, error) {
	if d, ok := a.dirs[p+"/"]; ok {
		return d, nil
	}
	dir, base, err := a.parent(p)
	if err != nil {
		return nil, err
	}
	if _, err := a.ensureDir(dir, base, p, "a directory"); err != nil {
		return nil, err
	}
	d, err := openNoFollow(dir, base, unix.O_DIRECTORY)
	if err != nil {
		return nil, err
	}
	a.dirs[p+"/"] = d
	return d, nil
}

// lstatAt reports what is at base inside dir without following a symlink.
func lstatAt(dir *os.File, base string) (*unix.Stat_t, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(int(dir.Fd()), base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return nil, err
	}
	return &st, nil
}

func (a *applier) device(s Step) (Op, error) {
	dir, base, err := a.parent(s.Target)
	if err != nil {
		return OpResolveParent, err
	}
	dev := unix.Mkdev(s.Major, s.Minor)
	switch st, err := lstatAt(dir, base); {
	case errors.Is(err, unix.ENOENT):
	case err != nil:
		return OpStat, err
	case st.Mode&unix.S_IFMT == unix.S_IFCHR && st.Rdev == dev:
		// The runtime (or CDI, or an earlier run of this hook) already
		// made the right node; make sure anyone in the container can open
		// it, as on a WSL host.
		if st.Mode&0o777 == 0o666 {
			a.log.Infof("keep %s: already the GPU device", s.Target)
			return "", nil
		}
		return OpChmod, unix.Fchmodat(int(dir.Fd()), base, 0o666, 0)
	case st.Mode&unix.S_IFMT == unix.S_IFDIR:
		return OpReplace, fmt.Errorf("the image has a directory at %s: remove it from the image", s.Target)
	default:
		// A regular file, a symlink or a node with other numbers: an image
		// cannot choose what the container's /dev/dxg is.
		a.log.Warnf("replace %s in the image (mode %o) with the GPU device node", s.Target, st.Mode)
		if err := unix.Unlinkat(int(dir.Fd()), base, 0); err != nil {
			return OpRemoveExisting, err
		}
	}
	if s.BindNode {
		return a.bindDevice(dir, base, s)
	}
	if err := unix.Mknodat(int(dir.Fd()), base, unix.S_IFCHR|0o666, int(dev)); err != nil {
		if !errors.Is(err, unix.EPERM) {
			return OpMknod, err
		}
		// Not allowed to mknod after all (a user namespace the caller did
		// not know of): bind the host node.
		return a.bindDevice(dir, base, s)
	}
	a.onUndo(dir, base, 0)
	return OpChmod, unix.Fchmodat(int(dir.Fd()), base, 0o666, 0)
}

func (a *applier) bindDevice(dir *os.File, base string, s Step) (Op, error) {
	fd, err := createFile(dir, base)
	if errors.Is(err, unix.EOVERFLOW) {
		// The container's user namespace mounted its /dev and does not map
		// host root, so no file of root's can exist there: create the mount
		// point as the directory's owner, the container's root.
		fd, err = createAsOwner(dir, base)
	}
	if err != nil {
		return OpCreateMountPoint, err
	}
	unix.Close(fd)
	a.onUndo(dir, base, 0)
	target, err := openNoFollow(dir, base, 0)
	if err != nil {
		return OpOpenMountPoint, err
	}
	defer target.Close()
	return a.mountOnto(s.Source, target, 0)
}

func createFile(dir *os.File, base string) (int, error) {
	return unix.Openat(int(dir.Fd()), base, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o666)
}

// createAsOwner creates base with this thread's file-system ids set to the
// owner of dir. They are per thread, so the thread stays locked meanwhile.
func createAsOwner(dir *os.File, base string) (int, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(dir.Fd()), &st); err != nil {
		return -1, err
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	gid, _ := unix.SetfsgidRetGid(int(st.Gid))
	defer unix.SetfsgidRetGid(gid)
	uid, _ := unix.SetfsuidRetUid(int(st.Uid))
	defer unix.SetfsuidRetUid(uid)
	return createFile(dir, base)
}

// ensureDir makes base in dir a real directory: made when absent, kept
// when it is one (an image folder at a WSL path is hidden by what is
// mounted there, as on a WSL host), and anything else the image has there
// (a link, a file) replaced, never followed. The caller's
// O_DIRECTORY|O_NOFOLLOW open checks what it finally is.
func (a *applier) ensureDir(dir *os.File, base, target, as string) (Op, error) {
	switch st, err := lstatAt(dir, base); {
	case errors.Is(err, unix.ENOENT):
		// EEXIST: another hook sharing this rootfs made it meanwhile.
		if err := unix.Mkdirat(int(dir.Fd()), base, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
			return OpMkdir, err
		}
	case err != nil:
		return OpStat, err
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		a.log.Warnf("replace %s in the image (mode %o) with %s", target, st.Mode, as)
		if err := unix.Unlinkat(int(dir.Fd()), base, 0); err != nil {
			return OpRemoveExisting, err
		}
		if err := unix.Mkdirat(int(dir.Fd()), base, 0o755); err != nil {
			return OpMkdir, err
		}
	}
	return "", nil
}

func (a *applier) bind(s Step) (Op, error) {
	dir, base, err := a.parent(s.Target)
	if err != nil {
		return OpResolveParent, err
	}
	if op, err := a.ensureDir(dir, base, s.Target, "a mount point"); err != nil {
		return op, err
	}
	target, err := openNoFollow(dir, base, unix.O_DIRECTORY)
	if err != nil {
		return OpOpenMountPoint, err
	}
	defer target.Close()
	if done, err := alreadyBound(s.Source, target); err != nil {
		return OpStat, err
	} else if done {
		// A second run of the hook (two stages, the wrapper's hook next to
		// Docker's, a CDI hook after hooks.d): one mount per path.
		a.log.Infof("keep %s: %s is already mounted there read-only", s.Target, s.Source)
		return "", nil
	}
	return a.mountOnto(s.Source, target, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
}

// boundFlags are the mount flags every bind of the hook carries.
const boundFlags = unix.ST_RDONLY | unix.ST_NOSUID | unix.ST_NODEV

// alreadyBound reports whether target (an O_PATH handle, which resolves to
// whatever is mounted on the mount point) is the source directory itself,
// mounted read-only, nosuid and nodev: what a bind of this step left. The
// same inode on the same device is the same directory; an image cannot
// fake it, and a writable mount of it does not count.
func alreadyBound(source string, target *os.File) (bool, error) {
	var src, dst unix.Stat_t
	if err := unix.Stat(source, &src); err != nil {
		// open_tree reports it with the advice that fits.
		return false, nil
	}
	if err := unix.Fstat(int(target.Fd()), &dst); err != nil {
		return false, err
	}
	if src.Dev != dst.Dev || src.Ino != dst.Ino {
		return false, nil
	}
	var fs unix.Statfs_t
	if err := unix.Fstatfs(int(target.Fd()), &fs); err != nil {
		return false, err
	}
	return fs.Flags&boundFlags == boundFlags, nil
}

// bindFile binds a host file or socket onto a file mount point. A regular
// file the image has there is hidden, as a directory is by bind; a link or
// a node is replaced, never followed; a directory is the image's mistake.
func (a *applier) bindFile(s Step) (Op, error) {
	dir, base, err := a.parent(s.Target)
	if err != nil {
		return OpResolveParent, err
	}
	create := func() (Op, error) {
		fd, err := createFile(dir, base)
		if errors.Is(err, unix.EOVERFLOW) {
			// As for a bound node: a user namespace's root owns the dir.
			fd, err = createAsOwner(dir, base)
		}
		if errors.Is(err, unix.EEXIST) {
			// Another hook sharing this rootfs made it meanwhile; the
			// check after the open below says what it is.
			return "", nil
		}
		if err != nil {
			return OpCreateMountPoint, err
		}
		unix.Close(fd)
		a.onUndo(dir, base, 0)
		return "", nil
	}
	switch st, err := lstatAt(dir, base); {
	case errors.Is(err, unix.ENOENT):
		if op, err := create(); err != nil {
			return op, err
		}
	case err != nil:
		return OpStat, err
	case st.Mode&unix.S_IFMT == unix.S_IFREG:
	case st.Mode&unix.S_IFMT == unix.S_IFDIR:
		return OpReplace, fmt.Errorf("the image has a directory at %s: remove it from the image", s.Target)
	default:
		a.log.Warnf("replace %s in the image (mode %o) with a mount point", s.Target, st.Mode)
		if err := unix.Unlinkat(int(dir.Fd()), base, 0); err != nil {
			return OpRemoveExisting, err
		}
		if op, err := create(); err != nil {
			return op, err
		}
	}
	target, err := openNoFollow(dir, base, 0)
	if err != nil {
		return OpOpenMountPoint, err
	}
	defer target.Close()
	if done, err := alreadyBound(s.Source, target); err != nil {
		return OpStat, err
	} else if done {
		a.log.Infof("keep %s: %s is already mounted there read-only", s.Target, s.Source)
		return "", nil
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(target.Fd()), &st); err != nil {
		return OpStat, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return OpOpenMountPoint, fmt.Errorf("%s changed into mode %o while the hook worked: %w", s.Target, st.Mode, unix.ELOOP)
	}
	return a.mountOnto(s.Source, target, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
}

func openNoFollow(dir *os.File, base string, flags int) (*os.File, error) {
	fd, err := unix.Openat(int(dir.Fd()), base, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC|flags, 0)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), base), nil
}

// mountOnto clones the host path source into a detached mount, sets its
// attributes while nobody can see it, and attaches it onto the O_PATH handle
// target: the mount never exists writable and never lands anywhere but the
// directory the handle names, even if the image swaps symlinks meanwhile.
func (a *applier) mountOnto(source string, target *os.File, attrs uint64) (Op, error) {
	tree, err := unix.OpenTree(unix.AT_FDCWD, source, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return OpOpenTree, err
	}
	defer unix.Close(tree)
	if attrs != 0 {
		attr := &unix.MountAttr{Attr_set: attrs}
		if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH, attr); err != nil {
			return OpSetattr, err
		}
	}
	if err := unix.MoveMount(tree, "", int(target.Fd()), "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return OpMoveMount, err
	}
	// The attached mount is the tree handle itself: detaching it through
	// that handle undoes exactly this mount and nothing the image placed.
	undoFD, err := a.dup(tree)
	if err != nil {
		return OpDup, err
	}
	a.undo = append(a.undo, func() error {
		p := "/proc/thread-self/fd/" + strconv.Itoa(undoFD)
		if err := unix.Unmount(p, unix.MNT_DETACH); err != nil {
			return fmt.Errorf("unmount %s: %w", source, err)
		}
		return nil
	})
	return "", nil
}

// dup keeps a copy of fd for an undo action. The copies are closed when
// Apply returns, whether the undo actions ran or not.
func (a *applier) dup(fd int) (int, error) {
	d, err := unix.Dup(fd)
	if err != nil {
		return -1, err
	}
	a.fds = append(a.fds, d)
	return d, nil
}

// onUndo removes base from dir when the apply fails later.
func (a *applier) onUndo(dir *os.File, base string, flags int) {
	fd, err := a.dup(int(dir.Fd()))
	if err != nil {
		return
	}
	a.undo = append(a.undo, func() error {
		return unix.Unlinkat(fd, base, flags)
	})
}

// writeFile replaces target with what content returns for its current
// content (nil when absent), atomically through a temporary file in the same
// directory, so the image never sees a half-written loader cache. A symlink
// at target is replaced, never followed.
func (a *applier) writeFile(target string, content func(old []byte) ([]byte, error)) (Op, error) {
	dir, base, err := a.parent(target)
	if err != nil {
		return OpResolveParent, err
	}
	dfd := int(dir.Fd())

	old, existed, err := readRegular(dfd, base)
	if err != nil {
		return OpReadExisting, err
	}
	data, err := content(old)
	if err != nil {
		return OpBuildContent, err
	}
	if existed && bytes.Equal(old, data) {
		// Written before (by an earlier run of the hook): leave the file,
		// its inode and its time alone.
		a.log.Infof("keep %s: already up to date", target)
		return "", nil
	}
	tmp := "." + base + ".wsl-gpu-hook." + strconv.Itoa(os.Getpid())
	fd, err := unix.Openat(dfd, tmp, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return OpCreate, err
	}
	f := os.NewFile(uintptr(fd), tmp)
	_, werr := f.Write(data)
	cerr := f.Close()
	if werr == nil {
		werr = cerr
	}
	if werr == nil {
		// umask may have cleared bits; readers in the container need 0644.
		werr = unix.Fchmodat(dfd, tmp, 0o644, 0)
	}
	if werr == nil {
		werr = unix.Renameat(dfd, tmp, dfd, base)
	}
	if werr != nil {
		unix.Unlinkat(dfd, tmp, 0)
		return OpWrite, werr
	}
	undoDir, err := a.dup(dfd)
	if err != nil {
		return OpDup, err
	}
	a.undo = append(a.undo, func() error {
		if !existed {
			return unix.Unlinkat(undoDir, base, 0)
		}
		fd, err := unix.Openat(undoDir, base, unix.O_WRONLY|unix.O_TRUNC|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		f := os.NewFile(uintptr(fd), base)
		defer f.Close()
		_, err = f.Write(old)
		return err
	})
	return "", nil
}

// readRegular returns the content of base in dfd when it is a regular file.
func readRegular(dfd int, base string) ([]byte, bool, error) {
	fd, err := unix.Openat(dfd, base, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	switch {
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ELOOP):
		return nil, false, nil
	case err != nil:
		return nil, false, err
	}
	f := os.NewFile(uintptr(fd), base)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, false, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, false, fmt.Errorf("%s is not a regular file in the image: remove it from the image", base)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxCacheSize+1))
	if err != nil {
		return nil, false, err
	}
	if len(data) > maxCacheSize {
		return nil, false, fmt.Errorf("%s is larger than %d bytes", base, maxCacheSize)
	}
	return data, true, nil
}

func (a *applier) symlink(s Step) (Op, error) {
	dir, base, err := a.parent(s.Target)
	if err != nil {
		return OpResolveParent, err
	}
	if _, err := lstatAt(dir, base); err == nil {
		a.log.Infof("keep %s: the image has its own", s.Target)
		return "", nil
	} else if !errors.Is(err, unix.ENOENT) {
		return OpStat, err
	}
	if err := unix.Symlinkat(s.Source, int(dir.Fd()), base); err != nil {
		return OpSymlink, err
	}
	a.onUndo(dir, base, 0)
	return "", nil
}
