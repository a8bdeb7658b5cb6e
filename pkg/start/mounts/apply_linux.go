package mounts

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/atomicfile"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/wsl"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/hooklog"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/ldcache"
)

// glibcLoader is where every glibc image of this machine keeps its dynamic
// loader (the path is in every binary's PT_INTERP, so images cannot move
// it): /lib64/ld-linux-x86-64.so.2 on x86_64, /lib/ld-linux-aarch64.so.1
// on arm64, whose libraries the lib dir holds there.
const glibcLoader = ldcache.NativeLoader

// maxCacheSize bounds the image's ld.so.cache the hook reads; a Debian
// cache is ~20 KiB, a large distro's a few MiB.
const maxCacheSize = 64 << 20

// Apply carries out steps inside the root filesystem at rootfs. It must run
// in the container's mount namespace (see nsenter). On error everything it
// did is undone before it returns.
func Apply(rootfs string, steps []Step, log *hooklog.Logger) error {
	root, err := unix.Open(rootfs, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open container rootfs: %w", &os.PathError{Op: "open", Path: rootfs, Err: err})
	}
	defer unix.Close(root)
	return ApplyAt(root, steps, log)
}

// ApplyAt is Apply in the root filesystem open at root, a descriptor of
// its directory (O_PATH will do) that the caller proved to be the
// container's (package hookroot) and keeps: every step is resolved from
// it, never from a path. It does not close root.
func ApplyAt(root int, steps []Step, log *hooklog.Logger) (err error) {
	a := &applier{root: root, log: log, dirs: map[string]int{}}
	defer func() {
		if err != nil {
			a.rollback()
		}
		// After the undo actions, which use them.
		for _, d := range a.dirs {
			unix.Close(d)
		}
		for _, fd := range a.trees {
			unix.Close(fd)
		}
	}()
	glibc := a.exists(glibcLoader)
	for _, s := range steps {
		if s.NeedsGlibc && !glibc {
			log.Warnf("skip %s: the image has no glibc loader (%s), so the libraries are not registered with the loader: programs in it need LD_LIBRARY_PATH=%s", s.Target, glibcLoader, ContainerLibDir)
			continue
		}
		if log.Enabled(hooklog.Debug) { // not even a copy of s below the level
			log.Debugf("apply %s", s)
		}
		if err := a.apply(s); err != nil {
			return err
		}
	}
	return nil
}

// applier keeps what has been done so it can be undone.
type applier struct {
	root int // O_PATH descriptor of the rootfs
	log  *hooklog.Logger
	undo []func() error
	// dirs holds the parent directories already resolved, by container
	// path: each is resolved in the rootfs once per Apply, and later steps
	// use the same directory even if the image swaps a link meanwhile.
	// They stay open until Apply returns, so undo actions use them too.
	dirs map[string]int
	// trees are the attached mounts, kept open for their undo actions.
	trees []int
}

func (a *applier) rollback() {
	for i := len(a.undo) - 1; i >= 0; i-- {
		if err := a.undo[i](); err != nil {
			a.log.Errorf("undo: %v", err)
		}
	}
}

func (a *applier) exists(unsafePath string) bool {
	fd, err := openInRoot(a.root, unsafePath, unix.O_PATH)
	if err != nil {
		return false
	}
	unix.Close(fd)
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

// parent returns a descriptor of the directory that holds target, creating
// the directories on the way, all confined to the rootfs. It belongs to the
// applier: callers must not close it.
func (a *applier) parent(target string) (int, string, error) {
	dir, base := path.Split(target)
	if base == "" || base == "." || base == ".." {
		return -1, "", fmt.Errorf("bad target %q", target)
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
				return -1, "", err
			}
		}
	}
	d, err := mkdirAllInRoot(a.root, dir)
	if err != nil {
		return -1, "", err
	}
	a.dirs[dir] = d
	return d, base, nil
}

// claimDir makes sure the WSL-owned directory p is a real directory and
// returns a descriptor of it, kept with the others parent resolved. Its
// parent is resolved once; p itself is never followed if it is a link.
func (a *applier) claimDir(p string) (int, error) {
	if d, ok := a.dirs[p+"/"]; ok {
		return d, nil
	}
	dir, base, err := a.parent(p)
	if err != nil {
		return -1, err
	}
	if _, _, err := a.ensureDir(dir, base, p, "a directory"); err != nil {
		return -1, err
	}
	d, err := openNoFollow(dir, base, unix.O_DIRECTORY)
	if err != nil {
		return -1, err
	}
	a.dirs[p+"/"] = d
	return d, nil
}

// lstatAt reports what is at base inside dir without following a symlink.
func lstatAt(dir int, base string) (*unix.Stat_t, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(dir, base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
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
	if !s.BindNode {
		// Usually nothing is there yet (the runtime's /dev is fresh):
		// make the node first and look only when something is in the way.
		// mknod never follows a link; EEXIST comes before EPERM.
		switch err := a.mknod(dir, base, dev); {
		case err == nil:
			return OpChmod, unix.Fchmodat(dir, base, 0o666, 0)
		case errors.Is(err, unix.EPERM):
			return a.bindDevice(dir, base, s)
		case !errors.Is(err, unix.EEXIST):
			return OpMknod, err
		}
	}
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
		return OpChmod, unix.Fchmodat(dir, base, 0o666, 0)
	case st.Mode&unix.S_IFMT == unix.S_IFDIR:
		return OpReplace, fmt.Errorf("the image has a directory at %s: remove it from the image", s.Target)
	default:
		// A regular file, a symlink or a node with other numbers: an image
		// cannot choose what the container's /dev/dxg is.
		a.log.Warnf("replace %s in the image (mode %o) with the GPU device node", s.Target, st.Mode)
		if err := unix.Unlinkat(dir, base, 0); err != nil {
			return OpRemoveExisting, err
		}
	}
	if s.BindNode {
		return a.bindDevice(dir, base, s)
	}
	if err := a.mknod(dir, base, dev); err != nil {
		if !errors.Is(err, unix.EPERM) {
			return OpMknod, err
		}
		// Not allowed to mknod after all (a user namespace the caller did
		// not know of): bind the host node.
		return a.bindDevice(dir, base, s)
	}
	return OpChmod, unix.Fchmodat(dir, base, 0o666, 0)
}

// mknod makes the character device dev at base in dir and removes it again
// if Apply fails later. The mode is subject to the umask.
func (a *applier) mknod(dir int, base string, dev uint64) error {
	if err := unix.Mknodat(dir, base, unix.S_IFCHR|0o666, int(dev)); err != nil {
		return err
	}
	a.onUndo(dir, base)
	return nil
}

func (a *applier) bindDevice(dir int, base string, s Step) (Op, error) {
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
	a.onUndo(dir, base)
	target, err := openNoFollow(dir, base, 0)
	if err != nil {
		return OpOpenMountPoint, err
	}
	defer unix.Close(target)
	return a.mountOnto(s.Source, target, 0)
}

func createFile(dir int, base string) (int, error) {
	return unix.Openat(dir, base, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o666)
}

// createAsOwner creates base with this thread's file-system ids set to the
// owner of dir. They are per thread, so the thread stays locked meanwhile.
func createAsOwner(dir int, base string) (int, error) {
	var st unix.Stat_t
	if err := unix.Fstat(dir, &st); err != nil {
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
// O_DIRECTORY|O_NOFOLLOW open checks what it finally is. made says this
// call made the directory, so nothing can be mounted on it yet.
func (a *applier) ensureDir(dir int, base, target, as string) (made bool, op Op, err error) {
	// Usually absent in a fresh container: make it first and look only
	// when something is there (mkdir never follows a link).
	err = unix.Mkdirat(dir, base, 0o755)
	if !errors.Is(err, unix.EEXIST) {
		return err == nil, OpMkdir, err
	}
	switch st, err := lstatAt(dir, base); {
	case errors.Is(err, unix.ENOENT):
		// Removed meanwhile (another hook sharing this rootfs); EEXIST:
		// made again meanwhile.
		if err := unix.Mkdirat(dir, base, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
			return false, OpMkdir, err
		}
	case err != nil:
		return false, OpStat, err
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		a.log.Warnf("replace %s in the image (mode %o) with %s", target, st.Mode, as)
		if err := unix.Unlinkat(dir, base, 0); err != nil {
			return false, OpRemoveExisting, err
		}
		if err := unix.Mkdirat(dir, base, 0o755); err != nil {
			return false, OpMkdir, err
		}
		return true, "", nil
	}
	return false, "", nil
}

func (a *applier) bind(s Step) (Op, error) {
	dir, base, err := a.parent(s.Target)
	if err != nil {
		return OpResolveParent, err
	}
	made, op, err := a.ensureDir(dir, base, s.Target, "a mount point")
	if err != nil {
		return op, err
	}
	target, err := openNoFollow(dir, base, unix.O_DIRECTORY)
	if err != nil {
		return OpOpenMountPoint, err
	}
	defer unix.Close(target)
	if made {
		// Nothing is mounted on a directory just made.
	} else if done, err := alreadyBound(s.Source, target, nil); err != nil {
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

// alreadyBound reports whether target (an O_PATH descriptor, which
// resolves to whatever is mounted on the mount point) is the source itself,
// mounted read-only, nosuid and nodev: what a bind of this step left. The
// same inode on the same device is the same file; an image cannot fake it,
// and a writable mount of it does not count. dst, when not nil, is
// target's fstat already made.
func alreadyBound(source string, target int, dst *unix.Stat_t) (bool, error) {
	var src unix.Stat_t
	if err := unix.Stat(source, &src); err != nil {
		// open_tree reports it with the advice that fits.
		return false, nil
	}
	if dst == nil {
		dst = new(unix.Stat_t)
		if err := unix.Fstat(target, dst); err != nil {
			return false, err
		}
	}
	if src.Dev != dst.Dev || src.Ino != dst.Ino {
		return false, nil
	}
	var fs unix.Statfs_t
	if err := unix.Fstatfs(target, &fs); err != nil {
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
	made := false
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
		a.onUndo(dir, base)
		made = true
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
		if err := unix.Unlinkat(dir, base, 0); err != nil {
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
	defer unix.Close(target)
	var st unix.Stat_t
	if err := unix.Fstat(target, &st); err != nil {
		return OpStat, err
	}
	if made {
		// Nothing is mounted on a file just made.
	} else if done, err := alreadyBound(s.Source, target, &st); err != nil {
		return OpStat, err
	} else if done {
		a.log.Infof("keep %s: %s is already mounted there read-only", s.Target, s.Source)
		return "", nil
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return OpOpenMountPoint, fmt.Errorf("%s changed into mode %o while the hook worked: %w", s.Target, st.Mode, unix.ELOOP)
	}
	return a.mountOnto(s.Source, target, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
}

func openNoFollow(dir int, base string, flags int) (int, error) {
	return unix.Openat(dir, base, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC|flags, 0)
}

// mountOnto clones the host path source into a detached mount, sets its
// attributes while nobody can see it, and attaches it onto the O_PATH
// descriptor target: the mount never exists writable and never lands
// anywhere but the directory target names, even if the image swaps
// symlinks meanwhile.
func (a *applier) mountOnto(source string, target int, attrs uint64) (Op, error) {
	tree, err := unix.OpenTree(unix.AT_FDCWD, source, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return OpOpenTree, err
	}
	if attrs != 0 {
		attr := &unix.MountAttr{Attr_set: attrs}
		if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH, attr); err != nil {
			unix.Close(tree)
			return OpSetattr, err
		}
	}
	if err := unix.MoveMount(tree, "", target, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		unix.Close(tree)
		return OpMoveMount, err
	}
	// The attached mount is the tree descriptor itself: detaching it
	// through that descriptor undoes exactly this mount and nothing the
	// image placed. It stays open until Apply returns.
	a.trees = append(a.trees, tree)
	a.undo = append(a.undo, func() error {
		p := "/proc/thread-self/fd/" + strconv.Itoa(tree)
		if err := unix.Unmount(p, unix.MNT_DETACH); err != nil {
			return fmt.Errorf("unmount %s: %w", source, err)
		}
		return nil
	})
	return "", nil
}

// onUndo removes base from dir when the apply fails later. dir is one of
// a.dirs, open until the undo actions ran.
func (a *applier) onUndo(dir int, base string) {
	a.undo = append(a.undo, func() error {
		return unix.Unlinkat(dir, base, 0)
	})
}

// writeFile replaces target with what content returns for its current
// content (nil when absent), atomically (package atomicfile), so the image
// never sees a half-written loader cache and a start killed meanwhile
// leaves nothing in the next one's way. A symlink at target is replaced,
// never followed.
func (a *applier) writeFile(target string, content func(old []byte) ([]byte, error)) (Op, error) {
	dfd, base, err := a.parent(target)
	if err != nil {
		return OpResolveParent, err
	}

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
	if err := atomicfile.WriteAt(dfd, base, data, 0o644); err != nil {
		return OpWrite, err
	}
	// dfd is one of a.dirs, open until the undo actions ran.
	a.undo = append(a.undo, func() error {
		if !existed {
			return unix.Unlinkat(dfd, base, 0)
		}
		return atomicfile.WriteAt(dfd, base, old, 0o644)
	})
	return "", nil
}

// readRegular returns the content of base in dfd when it is a regular file.
// It reads into one buffer of the size fstat reports (plus a byte to see
// the end): growing one from a small size, as io.ReadAll does, costs three
// times the memory for a loader cache, all of it fresh pages in a hook.
func readRegular(dfd int, base string) ([]byte, bool, error) {
	fd, err := unix.Openat(dfd, base, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	switch {
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ELOOP):
		return nil, false, nil
	case err != nil:
		return nil, false, err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, false, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, false, fmt.Errorf("%s is not a regular file in the image: remove it from the image", base)
	}
	tooLarge := func() error { return fmt.Errorf("%s is larger than %d bytes", base, maxCacheSize) }
	if st.Size > maxCacheSize {
		return nil, false, tooLarge()
	}
	// The file may still change size: read to the end whatever fstat said.
	data := make([]byte, 0, st.Size+1)
	for {
		if len(data) == cap(data) {
			data = slices.Grow(data, 4096)
		}
		n, err := unix.Read(fd, data[len(data):cap(data)])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, false, err
		}
		if n == 0 {
			return data, true, nil
		}
		if data = data[:len(data)+n]; len(data) > maxCacheSize {
			return nil, false, tooLarge()
		}
	}
}

func (a *applier) symlink(s Step) (Op, error) {
	dir, base, err := a.parent(s.Target)
	if err != nil {
		return OpResolveParent, err
	}
	// symlinkat fails with EEXIST for anything at base, a dangling link
	// included, and never follows one: no lstat needed first.
	switch err := unix.Symlinkat(s.Source, dir, base); {
	case errors.Is(err, unix.EEXIST):
		a.log.Infof("keep %s: the image has its own", s.Target)
		return "", nil
	case err != nil:
		return OpSymlink, err
	}
	a.onUndo(dir, base)
	return "", nil
}
