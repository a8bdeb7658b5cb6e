package probecache

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/atomicfile"
	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/ldcache"
)

// Sonames is the lib dir's SONAMEs as a scan read them (an ldcache.Memo),
// kept in a file that outlives the boot. The probe cache is keyed on the
// boot, and WSL shuts its VM down a minute after the last process exits,
// so the first container start after each boot probes again; without the
// memo it reads the ELF headers of every library in the lib dir (on 9p an
// open, a read, a flush and a release each, beyond the lookup), where with
// it a stat of each file is enough. A file whose name or FileID changed
// is read again. The file holds only what the latest scan found, and is
// read and written with the probe cache's rules: a regular file of this
// user's that no one else may write, in a directory of this user's alone,
// decoded exactly and validated, else ignored and replaced.
type Sonames struct {
	libDir  string
	known   map[string]sonameEntry
	kept    []sonameEntry
	changed bool
}

type sonameEntry struct {
	name   string
	id     ldcache.FileID
	soname string
	lib    bool
}

// sonamesMagic starts every SONAME file; sonamesVersion follows it.
const (
	sonamesMagic   = "WSLGPUSN"
	sonamesVersion = 1
)

// SonamesGlob matches the names SonamesPath gives files.
const SonamesGlob = "sonames-*.bin"

// SonamesPath is the SONAME file in dir for the lib dir libDir.
func SonamesPath(dir, libDir string) string {
	return hashedPath(dir, SonamesGlob, libDir)
}

// LoadSonames reads the SONAMEs kept at path for libDir. It always returns
// a usable memo: on any error (errors.Is(err, fs.ErrNotExist) is the quiet
// one) an empty one, which Save then replaces the file with.
func LoadSonames(path, libDir string) (*Sonames, error) {
	s := &Sonames{libDir: libDir, known: map[string]sonameEntry{}}
	data, err := readChecked(path)
	if err != nil {
		return s, err
	}
	known, err := decodeSonames(data, libDir)
	if err != nil {
		return s, fmt.Errorf("%s: %w", path, err)
	}
	s.known = known
	return s, nil
}

// Has is ldcache.Memo's: whether the file held name.
func (s *Sonames) Has(name string) bool {
	_, ok := s.known[name]
	return ok
}

// Soname is ldcache.Memo's: what the file said of name when it had id.
func (s *Sonames) Soname(name string, id ldcache.FileID) (soname string, lib, known bool) {
	e, ok := s.known[name]
	if !ok || e.id != id {
		return "", false, false
	}
	return e.soname, e.lib, true
}

// Keep is ldcache.Memo's: name had id and said soname.
func (s *Sonames) Keep(name string, id ldcache.FileID, soname string, lib bool) {
	e := sonameEntry{name: name, id: id, soname: soname, lib: lib}
	if s.known[name] != e {
		s.changed = true
	}
	s.kept = append(s.kept, e)
}

// Changed reports whether the scan kept anything other than what the file
// held: a file read anew, or one gone.
func (s *Sonames) Changed() bool {
	return s.changed || len(s.kept) != len(s.known)
}

// Save replaces the file at path with what the scan kept, atomically, mode
// 0644 (as the probe cache: a hook in a user namespace of its own reads
// it). The directory is never made here: it is the package's (the .deb
// ships it), so a machine without it, a test host among them, gets nothing
// written (errors.Is(err, fs.ErrNotExist)); one that is not this user's
// alone is refused, and in a user namespace of the caller's own Save is
// ErrReadOnly.
func (s *Sonames) Save(path string) error {
	var e encoder
	e.b = append(e.b, sonamesMagic...)
	e.u32(sonamesVersion)
	e.str(s.libDir)
	e.u32(uint32(len(s.kept)))
	for _, k := range s.kept {
		e.str(k.name)
		e.u64(k.id.Ino)
		e.u64(k.id.Size)
		e.u64(uint64(k.id.Mtime))
		e.u64(uint64(k.id.Ctime))
		e.bool(k.lib)
		e.str(k.soname)
	}
	if len(e.b) > MaxSize {
		return fmt.Errorf("not keeping the SONAMEs of %s: %d bytes, more than %d", s.libDir, len(e.b), MaxSize)
	}
	if err := writableDir(filepath.Dir(path), nil); err != nil {
		return err
	}
	return atomicfile.Write(path, e.b, 0o644, atomicfile.Keep)
}

// maxSoname bounds a kept SONAME as ldcache's reader bounds what it reads.
const maxSoname = 4095

func decodeSonames(data []byte, libDir string) (map[string]sonameEntry, error) {
	if len(data) < len(sonamesMagic) || string(data[:len(sonamesMagic)]) != sonamesMagic {
		return nil, errors.New("not a SONAME file")
	}
	d := decoder{b: data[len(sonamesMagic):]}
	if v := d.u32(); d.err == nil && v != sonamesVersion {
		return nil, fmt.Errorf("format %d, want %d", v, sonamesVersion)
	}
	if dir := d.str(); d.err == nil && dir != libDir {
		return nil, fmt.Errorf("made for lib dir %q, not %q", dir, libDir)
	}
	n := d.count(4 + 8*4 + 1 + 4)
	known := make(map[string]sonameEntry, n)
	for range n {
		var e sonameEntry
		e.name = d.str()
		e.id = ldcache.FileID{Ino: d.u64(), Size: d.u64(), Mtime: int64(d.u64()), Ctime: int64(d.u64())}
		e.lib = d.bool()
		e.soname = d.str()
		if d.err != nil {
			break
		}
		// What a scan could not have kept: a name that is not one entry
		// of a directory, twice the same name, a SONAME the reader would
		// not return.
		switch {
		case e.name == "" || len(e.name) > 255 || strings.ContainsAny(e.name, "/\x00") || e.name == "." || e.name == "..":
			return nil, fmt.Errorf("kept file name %q", e.name)
		case known[e.name].name != "":
			return nil, fmt.Errorf("file %q kept twice", e.name)
		case len(e.soname) > maxSoname || strings.ContainsRune(e.soname, 0) || (!e.lib && e.soname != ""):
			return nil, fmt.Errorf("kept SONAME %q of %q", e.soname, e.name)
		}
		known[e.name] = e
	}
	if d.err != nil {
		return nil, d.err
	}
	if len(d.b) != 0 {
		return nil, errors.New("data after the SONAMEs")
	}
	return known, nil
}
