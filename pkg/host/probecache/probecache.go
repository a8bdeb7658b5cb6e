package probecache

import (
	"bytes"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/smallfile"

	"golang.org/x/sys/unix"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/dxcore"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/nstrust"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/atomicfile"
)

// MaxSize bounds a cache file: a host with 64 adapters and a few hundred
// libraries needs well under it.
const MaxSize = 256 << 10

// BootIDPath is where the kernel says which boot this is.
const BootIDPath = "/proc/sys/kernel/random/boot_id"

// version is the file format (codec.go); a file of another version is a
// miss. Version 1 was JSON; 2 had no sysfs reading; 3 was the same as 4,
// but 0600, which a hook in a user namespace of its own cannot read: the
// next start replaces it.
const version = 4

// Stamp is what one stat of a directory says about its state.
type Stamp struct {
	Dev, Ino     uint64
	Mode         uint32
	Mtime, Ctime int64 // nanoseconds since the epoch
}

// StampOf stats dir, following links as the probe does.
func StampOf(dir string) (Stamp, error) {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return Stamp{}, &os.PathError{Op: "stat", Path: dir, Err: err}
	}
	return Stamp{Dev: st.Dev, Ino: st.Ino, Mode: st.Mode,
		Mtime: st.Mtim.Nano(), Ctime: st.Ctim.Nano()}, nil
}

// IsReadableDir: the stamp is of a directory everyone may read and enter,
// as the probe requires of the lib dir.
func (s Stamp) IsReadableDir() bool {
	return s.Mode&unix.S_IFMT == unix.S_IFDIR && s.Mode&0o005 == 0o005
}

// Key is everything a cached probe depends on.
type Key struct {
	BootID                     string
	Device, LibDir, DriversDir string
	// Details and Ldcache say what the probe asked: a cache with them
	// serves a start that needs them or not; one without serves only a
	// start that does not.
	Details, Ldcache bool
	// LUIDs are the listed adapters' LUIDs in enumeration order.
	LUIDs        []uint64
	Lib, Drivers Stamp
	// Sysfs is the sysfs root the driver's bound devices were read from
	// ("" when not configured), and Bound their reading's stamp
	// (dxgsysfs.Reading.Stamp). A cached key has Bound only when that
	// reading named every adapter the enumeration found, so that an equal
	// reading later can stand in for the enumeration (Listed).
	Sysfs, Bound string
}

// Serves reports whether a probe made under k answers a start whose
// current state is now.
func (k *Key) Serves(now *Key) bool {
	return k.BootID == now.BootID && k.BootID != "" &&
		k.Device == now.Device && k.LibDir == now.LibDir && k.DriversDir == now.DriversDir &&
		(k.Details || !now.Details) && (k.Ldcache || !now.Ldcache) &&
		slices.Equal(k.LUIDs, now.LUIDs) && k.Lib == now.Lib && k.Drivers == now.Drivers &&
		k.Sysfs == now.Sysfs && (k.Bound == "" || k.Bound == now.Bound)
}

// Listed reports whether the devices now bound are the ones k was made
// with, so that k's LUIDs are the adapters' without asking /dev/dxg.
func (k *Key) Listed(now *Key) bool {
	return k.Bound != "" && k.Bound == now.Bound
}

// LUIDs turns an enumeration's LUIDs into a Key's.
func LUIDs(ls []dxcore.LUID) []uint64 {
	out := make([]uint64, len(ls))
	for i, l := range ls {
		out[i] = l.Uint64()
	}
	return out
}

// BootID reads this boot's id.
func BootID() (string, error) {
	b, err := smallfile.Read(BootIDPath, 64)
	if err != nil {
		return "", err
	}
	id := string(bytes.TrimSpace(b))
	if len(id) != 36 {
		return "", fmt.Errorf("%s: unexpected content %q", BootIDPath, id)
	}
	return id, nil
}

// Glob matches the names Path gives cache files, for whoever looks for
// them in a cache dir (tests, cleanup): the format is in the name, so a
// binary of another format never reads them.
const Glob = "probe-*.bin"

// Path is the cache file in dir for a configuration: one file per device,
// lib dir and drivers dir, so hosts simulated side by side (tests) do not
// evict each other. The key holds the paths too, so a hash collision is
// only a miss.
func Path(dir string, k *Key) string {
	return hashedPath(dir, Glob, k.Device, k.LibDir, k.DriversDir)
}

// hashedPath is the file in dir named by glob with its * replaced by a
// hash of parts.
func hashedPath(dir, glob string, parts ...string) string {
	h := fnv.New64a()
	for _, s := range parts {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return filepath.Join(dir, strings.Replace(glob, "*", fmt.Sprintf("%016x", h.Sum64()), 1))
}

// ErrStale is Load's error for a well-formed file made under another key.
var ErrStale = errors.New("made for another state of the host")

// Load reads the probe cached at path for a start whose state is now
// (now.LUIDs are not known yet and not compared: see Key.Serves). It
// returns the file's key for the caller to compare LUIDs against. Any
// error means a miss; errors.Is(err, fs.ErrNotExist) is the quiet one.
func Load(path string, now *Key) (*Key, *Probe, error) {
	data, err := readChecked(path)
	if err != nil {
		return nil, nil, err
	}
	key, probe, err := decode(data)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := probe.validate(key); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	withLUIDs := *now
	withLUIDs.LUIDs = key.LUIDs
	if !key.Serves(&withLUIDs) {
		return nil, nil, fmt.Errorf("%s: %w", path, ErrStale)
	}
	return key, probe, nil
}

// ErrUntrusted is the error (errors.Is) for a cache file that is not
// trusted: not this user's alone, or, in a user namespace of the caller's
// own, one the namespace can have written. Such a file is a sign of
// tampering, where a stale or missing one is not.
var ErrUntrusted = errors.New("not trusted")

// ErrReadOnly is Save's error in a user namespace of the caller's own,
// where the cache is root's to write and the namespace's only to read.
var ErrReadOnly = errors.New("the cache is written by root: a hook in a user namespace of its own only reads it")

// untrusted is a refusal; errors.Is(err, ErrUntrusted).
type untrusted struct {
	msg      string
	notOwner bool // refused for its owner alone: the namespace rule may still trust it
}

func (e *untrusted) Error() string        { return e.msg }
func (e *untrusted) Is(target error) bool { return target == ErrUntrusted }

// readChecked reads path if it is a regular file of this user's that no
// one else may write, of at most MaxSize bytes, in a directory that is
// this user's and no one else's to write. A caller in a user namespace of
// its own (a CDI hook in a container with one, as the container's root)
// sees root's files as the overflow uid's: there the file is read if
// nothing in the namespace can have written it (package nstrust).
func readChecked(path string) ([]byte, error) {
	data, err := readOwned(path)
	var u *untrusted
	if err == nil || !errors.As(err, &u) || !u.notOwner {
		return data, err
	}
	ns, nerr := nstrust.Current()
	if nerr != nil || !ns.Own() {
		return nil, err
	}
	data, err = ns.ReadFile(path, MaxSize)
	if errors.Is(err, nstrust.ErrNotTrusted) {
		return nil, &untrusted{msg: err.Error()}
	}
	return data, err
}

func readOwned(path string) ([]byte, error) {
	if err := checkDir(filepath.Dir(path)); err != nil {
		return nil, err
	}
	// Plain system calls: os.NewFile would hand the O_NONBLOCK descriptor
	// to the runtime's network poller and set the poller up for it.
	data, err := smallfile.ReadVetted(path, MaxSize, unix.O_NOFOLLOW|unix.O_NONBLOCK, func(st *unix.Stat_t) error {
		switch {
		case st.Mode&unix.S_IFMT != unix.S_IFREG:
			return &untrusted{msg: fmt.Sprintf("%s is not a regular file", path)}
		case st.Size > MaxSize:
			return fmt.Errorf("%s is %d bytes, more than a cache can be (%d)", path, st.Size, MaxSize)
		}
		return ownedAlone(path, st)
	})
	if errors.Is(err, smallfile.ErrTooLarge) {
		return nil, fmt.Errorf("%s grew past %d bytes", path, MaxSize)
	}
	return data, err
}

func checkDir(dir string) error {
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return &os.PathError{Op: "stat", Path: dir, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return &untrusted{msg: fmt.Sprintf("%s is not a directory", dir)}
	}
	return ownedAlone(dir, &st)
}

// ownedAlone refuses what st describes unless it is this user's and no one
// else may write it.
func ownedAlone(path string, st *unix.Stat_t) error {
	switch {
	case int(st.Uid) != os.Geteuid():
		return &untrusted{msg: fmt.Sprintf("%s is owned by uid %d, not %d", path, st.Uid, os.Geteuid()), notOwner: true}
	case st.Mode&0o022 != 0:
		return &untrusted{msg: fmt.Sprintf("%s is writable by others (mode %04o)", path, st.Mode&0o7777)}
	}
	return nil
}

// writableDir is checkDir for a writer: in a user namespace of the
// caller's own, a directory it may not write is ErrReadOnly.
func writableDir(dir string, made error) error {
	err := made
	if err == nil {
		err = checkDir(dir)
	}
	var u *untrusted
	if err != nil && (errors.Is(err, fs.ErrPermission) || errors.As(err, &u) && u.notOwner) {
		if ns, nerr := nstrust.Current(); nerr == nil && ns.Own() {
			return ErrReadOnly
		}
	}
	return err
}

// Save replaces the file at path with p made under k, atomically, mode
// 0644 (what it holds every user may learn from the host anyway; a hook
// in a user namespace of its own must read it). A directory that is
// missing is made (0755); one that is not this user's alone is refused,
// and in a user namespace of the caller's own Save is ErrReadOnly.
func Save(path string, k *Key, p *Probe) error {
	if err := p.validate(k); err != nil {
		return fmt.Errorf("not caching the probe: %w", err)
	}
	data := encode(k, p)
	if len(data) > MaxSize {
		return fmt.Errorf("not caching the probe: %d bytes, more than %d", len(data), MaxSize)
	}
	dir := filepath.Dir(path)
	if err := writableDir(dir, os.MkdirAll(dir, 0o755)); err != nil {
		return err
	}
	return atomicfile.Write(path, data, 0o644, atomicfile.Keep)
}
