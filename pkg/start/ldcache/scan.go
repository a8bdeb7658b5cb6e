package ldcache

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// ScanDir returns the entries ldconfig would make for the shared objects of
// this machine (x86_64 or aarch64, FlagNative) in hostDir, with paths under containerDir, where the container
// sees the same files. It picks files and keys as ldconfig does (names
// lib*.so*, ld-*.so*, ld.so.*, ld64.so.*; key = DT_SONAME, else the file
// name; a .so symlink whose target's SONAME extends its name keeps its own
// name) and returns them in cache order. One difference: ldconfig records
// dir/SONAME and relies on a symlink it creates, which it cannot do in a
// read-only mount. So the path names the file called like the key when
// that file is one of the key's candidates, else the candidate ldconfig
// would link to (a regular file before a symlink, then the highest
// version). WSL's three identical libcuda.so, libcuda.so.1, libcuda.so.1.1
// thus become one entry libcuda.so.1 -> containerDir/libcuda.so.1.
//
// Only the ELF header, program headers, dynamic segment and the SONAME
// string are read, never whole files. Files that are not ELF shared objects
// of this machine, and dangling symlinks, are skipped; other read errors
// fail.
func ScanDir(hostDir, containerDir string) ([]Entry, error) {
	return ScanDirMemo(hostDir, containerDir, nil)
}

// FileID is what one stat says of a file's identity and content: a file
// with the same name and FileID is taken to hold the same bytes, as a
// content change moves the modification and change times. The device is
// left out: the anonymous device numbers of 9p and overlay mounts may
// differ from one boot to the next, and the memo is for the next boot.
type FileID struct {
	Ino, Size    uint64
	Mtime, Ctime int64 // nanoseconds since the epoch
}

// A Memo remembers what earlier scans read of each file, so that a scan
// need not read a file it has seen: on WSL's 9p lib dir a stat is two
// round trips to Windows where reading the ELF headers is six or seven.
type Memo interface {
	// Has reports whether the memo knows a file called name at all: a
	// file it does not know is not stat'ed first but read at once, its
	// FileID taken from the open file (one request more than reading it
	// alone, where a stat first would be two).
	Has(name string) bool
	// Soname answers what an earlier scan read from the file called name
	// with identity id: its SONAME ("" for none) and whether it is a
	// library at all; known is false when it has not seen that file.
	Soname(name string, id FileID) (soname string, lib, known bool)
	// Keep records what this scan found for each file, read or answered.
	Keep(name string, id FileID, soname string, lib bool)
}

// ScanDirMemo is ScanDir asking memo, when not nil, before reading a file:
// each candidate file memo has a name for is stat'ed for its FileID, and
// what memo knows of it is not read again. Every candidate's answer is
// given to memo.Keep.
func ScanDirMemo(hostDir, containerDir string, memo Memo) ([]Entry, error) {
	if !path.IsAbs(containerDir) {
		return nil, fmt.Errorf("container directory %q is not an absolute path", containerDir)
	}
	des, err := os.ReadDir(hostDir)
	if err != nil {
		return nil, fmt.Errorf("list libraries: %w", err)
	}
	type candidate struct {
		name   string
		isLink bool
	}
	type group struct {
		best    candidate
		hasSelf bool // a candidate is named like the key
	}
	groups := map[string]*group{}
	head := make([]byte, headRead)
	var scratch []byte
	var order []string
	for _, de := range des {
		name := de.Name()
		if !isDSOName(name) || strings.HasSuffix(name, ".#prelink#") || strings.Contains(name, ".#prelink#.") {
			continue
		}
		isLink := de.Type()&fs.ModeSymlink != 0
		if !isLink && !de.Type().IsRegular() {
			continue
		}
		p := filepath.Join(hostDir, name)
		var id FileID
		haveID := false
		if isLink || (memo != nil && memo.Has(name)) {
			// Following the link: the identity is of what open reads.
			var st unix.Stat_t
			err := unix.Stat(p, &st)
			if isLink && errors.Is(err, unix.ENOENT) {
				continue
			}
			if err != nil {
				return nil, &os.PathError{Op: "stat", Path: p, Err: err}
			}
			if st.Mode&unix.S_IFMT != unix.S_IFREG {
				continue
			}
			id, haveID = fileID(&st), true
		}
		var soname string
		var ok, known bool
		if memo != nil && haveID {
			soname, ok, known = memo.Soname(name, id)
		}
		if !known {
			// A file changed after its FileID was taken is kept under
			// that FileID with what was read now: the next scan sees
			// another FileID and reads it again.
			var idOut *FileID
			if memo != nil && !haveID {
				idOut = &id
			}
			var err error
			if soname, ok, err = readSoname(p, head, &scratch, idOut); err != nil {
				return nil, err
			}
		}
		if memo != nil {
			memo.Keep(name, id, soname, ok)
		}
		if !ok {
			continue
		}
		if soname == "" {
			soname = name // implicit_soname
		}
		// ldconfig's search_dir: a symlink is a link only when its name is
		// the SONAME or a .so name the SONAME extends (libfoo.so ->
		// libfoo.so.1.2); such a link is cached under its own name.
		// Any other symlink counts as a file.
		if isLink && name != soname && !(strings.HasSuffix(name, ".so") && strings.HasPrefix(soname, name)) {
			isLink = false
		}
		if isLink {
			soname = name
		}
		c := candidate{name: name, isLink: isLink}
		g := groups[soname]
		if g == nil {
			g = &group{best: c}
			groups[soname] = g
			order = append(order, soname)
		} else if (!c.isLink && g.best.isLink) || (c.isLink == g.best.isLink && libcmp(g.best.name, c.name) < 0) {
			g.best = c
		}
		g.hasSelf = g.hasSelf || name == soname
	}
	entries := make([]Entry, 0, len(order))
	for _, key := range order {
		g := groups[key]
		file := g.best.name
		if g.hasSelf {
			file = key
		}
		entries = append(entries, Entry{Key: key, Path: path.Join(containerDir, file), Flags: FlagNative})
	}
	slices.SortStableFunc(entries, func(a, b Entry) int { return compare(&a, &b) })
	return entries, nil
}

func fileID(st *unix.Stat_t) FileID {
	return FileID{Ino: st.Ino, Size: uint64(st.Size), Mtime: st.Mtim.Nano(), Ctime: st.Ctim.Nano()}
}

// isDSOName is glibc's _dl_is_dso: the names ldconfig looks at.
func isDSOName(name string) bool {
	return ((strings.HasPrefix(name, "lib") || strings.HasPrefix(name, "ld-")) && strings.Contains(name, ".so")) ||
		strings.HasPrefix(name, "ld.so.") || strings.HasPrefix(name, "ld64.so.")
}

// Bounds for what readSoname reads; real libraries need far less.
const (
	headRead      = 16 << 10 // ELF header, program headers and, in small libraries, more
	maxPhdrBytes  = 1 << 16  // program header table
	maxDynBytes   = 1 << 20  // dynamic segment
	maxSonameRead = 4096     // SONAME string
)

// ELF values readSoname needs, as the gABI defines them (the machine this
// build reads, nativeMachine, is in native_<arch>.go) (debug/elf names them ELFMAG, ELFCLASS64, ...). They are spelled
// here because importing debug/elf for a few constants links
// compress/flate, internal/zstd and debug/dwarf into the hook, whose
// package init ran at every container start (~0.25 ms on a test VM).
const (
	elfMagic     = "\x7fELF"
	elfClass64   = 2  // e_ident[EI_CLASS]
	elfData2LSB  = 1  // e_ident[EI_DATA]
	elfTypeDyn   = 3  // e_type ET_DYN
	elfPhdrSize  = 56 // sizeof(Elf64_Phdr)
	elfPTLoad    = 1  // p_type PT_LOAD
	elfPTDynamic = 2  // p_type PT_DYNAMIC
	elfDTNull    = 0  // d_tag DT_NULL
	elfDTStrtab  = 5  // d_tag DT_STRTAB
	elfDTSoname  = 14 // d_tag DT_SONAME
)

// readSoname reads the DT_SONAME of the file at p as ldconfig's
// process_elf_file does (see elfSoname). head is a reusable buffer of
// headRead bytes, scratch one for reads beyond it. It makes 3 to 5 system
// calls: on WSL the directory is a 9p mount where each costs a round trip.
// With id, the open file's FileID is taken before it is read.
func readSoname(p string, head []byte, scratch *[]byte, id *FileID) (soname string, ok bool, err error) {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOCTTY|unix.O_NONBLOCK, 0)
	if err != nil {
		return "", false, fmt.Errorf("open %s: %w", p, err)
	}
	defer unix.Close(fd)
	if id != nil {
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return "", false, &os.PathError{Op: "stat", Path: p, Err: err}
		}
		*id = fileID(&st)
	}
	n, err := pread(fd, head, 0)
	if err != nil {
		return "", false, fmt.Errorf("read %s: %w", p, err)
	}
	soname, ok, err = elfSoname(head[:n], scratch, func(buf []byte, off int64) (int, error) { return pread(fd, buf, off) })
	if err != nil {
		return "", false, fmt.Errorf("read %s: %w", p, err)
	}
	return soname, ok, nil
}

// elfSoname finds the DT_SONAME of an ELF file from its program headers
// and dynamic segment, as ldconfig's process_elf_file does, so libraries
// stripped of section headers work too. head is the file's start, readAt
// reads elsewhere (short only at the end of the file) into *scratch, which
// grows as needed and is kept for the next file: in a large library the
// dynamic segment and the SONAME lie beyond head, and a fresh buffer per
// file would cost fresh pages, each a page fault, in a hook that runs once.
// ok is false for what ldconfig skips: not ELF, not a 64-bit little-endian
// ET_DYN of this machine, no dynamic segment or no string table. soname is "" when
// there is none.
//
// The file is hostile: every offset and count comes from it, so each read
// is bounded (maxPhdrBytes, maxDynBytes, maxSonameRead) and checked
// against what was actually read; a file that lies reads as not a library.
func elfSoname(head []byte, scratch *[]byte, readAt func(buf []byte, off int64) (int, error)) (soname string, ok bool, err error) {
	// at returns n bytes at off (fewer at the end of the file), from head
	// when it holds them, else in *scratch: what it returned before is
	// overwritten, so each result is used up before the next call.
	at := func(off, n uint64) ([]byte, error) {
		if off <= uint64(len(head)) && n <= uint64(len(head))-off {
			return head[off : off+n], nil
		}
		if off > 1<<62 {
			return nil, nil
		}
		if uint64(cap(*scratch)) < n {
			*scratch = make([]byte, n)
		}
		buf := (*scratch)[:n]
		m, err := readAt(buf, int64(off))
		if err != nil {
			return nil, err
		}
		return buf[:m], nil
	}

	le := binary.LittleEndian
	if len(head) < 64 || string(head[:4]) != elfMagic || head[4] != elfClass64 || head[5] != elfData2LSB ||
		le.Uint16(head[16:]) != elfTypeDyn || le.Uint16(head[18:]) != nativeMachine {
		return "", false, nil
	}
	phoff, phentsize, phnum := le.Uint64(head[32:]), uint64(le.Uint16(head[54:])), uint64(le.Uint16(head[56:]))
	if phentsize != elfPhdrSize || phnum*phentsize > maxPhdrBytes {
		return "", false, nil
	}
	phdrs, err := at(phoff, phnum*phentsize)
	if err != nil || uint64(len(phdrs)) < phnum*phentsize {
		return "", false, err
	}
	type segment struct{ off, vaddr, filesz uint64 }
	var loads []segment
	var dyn *segment
	for i := range phnum {
		ph := phdrs[i*phentsize:]
		s := segment{off: le.Uint64(ph[8:]), vaddr: le.Uint64(ph[16:]), filesz: le.Uint64(ph[32:])}
		switch le.Uint32(ph) {
		case elfPTLoad:
			loads = append(loads, s)
		case elfPTDynamic:
			dyn = &s
		}
	}
	if dyn == nil {
		return "", false, nil
	}
	dynData, err := at(dyn.off, min(dyn.filesz, maxDynBytes))
	if err != nil {
		return "", false, err
	}
	var strtab, sonameOff uint64
	haveStrtab, haveSoname := false, false
	for ; len(dynData) >= 16; dynData = dynData[16:] {
		tag, val := le.Uint64(dynData), le.Uint64(dynData[8:])
		if tag == elfDTNull {
			break
		}
		switch {
		case tag == elfDTStrtab && !haveStrtab:
			strtab, haveStrtab = val, true
		case tag == elfDTSoname:
			sonameOff, haveSoname = val, true
		}
	}
	if !haveStrtab {
		return "", false, nil
	}
	if !haveSoname {
		return "", true, nil
	}
	// DT_STRTAB is an address; the PT_LOAD holding it gives its file offset.
	strOff := strtab
	for _, l := range loads {
		if strtab >= l.vaddr && strtab-l.vaddr < l.filesz {
			strOff = strtab - l.vaddr + l.off
			break
		}
	}
	if strOff > 1<<62 || sonameOff > 1<<62 {
		return "", false, nil
	}
	name, err := at(strOff+sonameOff, maxSonameRead)
	if err != nil {
		return "", false, err
	}
	end := bytes.IndexByte(name, 0)
	if end <= 0 {
		// Unterminated, or an empty SONAME, which ldconfig would store as
		// an empty key no dlopen can ask for.
		return "", false, nil
	}
	return string(name[:end]), true, nil
}

// pread fills buf from off, short only at the end of the file.
func pread(fd int, buf []byte, off int64) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := unix.Pread(fd, buf[n:], off+int64(n))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return n, err
		}
		if m == 0 {
			break
		}
		n += m
	}
	return n, nil
}
