package elfinfo

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Type is an ELF file's e_type.
type Type uint16

// Types callers decide on (the gABI's ET_EXEC and ET_DYN).
const (
	TypeExec Type = 2
	TypeDyn  Type = 3
)

// DF1PIE is DT_FLAGS_1's bit for a position-independent executable.
const DF1PIE = 0x08000000

// ErrNotELF is returned for a file that does not start with ELF's magic.
var ErrNotELF = errors.New("not an ELF file")

// File is what Read found.
type File struct {
	Type   Type
	Soname string // the first DT_SONAME; "" if none
	Flags1 uint64 // the first DT_FLAGS_1; 0 if none
	Interp bool   // a PT_INTERP program header is present
}

// Limits on what a file may make Read allocate or scan.
const (
	maxTable   = 1 << 20 // bytes of program or section headers (a library has a few KiB)
	maxDynamic = 1 << 20 // bytes of dynamic section
	maxString  = 4 << 10 // bytes of a DT_SONAME
)

// Read reads f's ELF header, program headers, section headers, dynamic
// section and the one string it needs. It returns ErrNotELF (wrapped) for
// a file without ELF's magic and a *FormatError for a damaged one.
func Read(f io.ReaderAt) (File, error) {
	var ident [16]byte
	n, err := f.ReadAt(ident[:], 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return File{}, fmt.Errorf("read ELF identification: %w", err)
	}
	if n < 4 || string(ident[:4]) != "\x7fELF" {
		return File{}, ErrNotELF
	}
	if n < len(ident) {
		return File{}, &FormatError{msg: "ELF identification cut short", err: io.ErrUnexpectedEOF}
	}
	r := reader{f: f}
	switch ident[5] {
	case 1:
		r.bo = binary.LittleEndian
	case 2:
		r.bo = binary.BigEndian
	default:
		return File{}, formatErr("unknown data encoding %d", ident[5])
	}
	switch ident[4] {
	case 1:
	case 2:
		r.is64 = true
	default:
		return File{}, formatErr("unknown class %d", ident[4])
	}
	if ident[6] != 1 {
		return File{}, formatErr("unknown ELF version %d", ident[6])
	}

	hdr := make([]byte, r.pick(52, 64))
	if err := readFull(f, hdr, 0, "ELF header"); err != nil {
		return File{}, err
	}
	var out File
	out.Type = Type(r.bo.Uint16(hdr[16:]))
	var phoff, shoff uint64
	var phentsize, phnum, shentsize, shnum int
	if r.is64 {
		phoff, shoff = r.bo.Uint64(hdr[32:]), r.bo.Uint64(hdr[40:])
		phentsize, phnum = int(r.bo.Uint16(hdr[54:])), int(r.bo.Uint16(hdr[56:]))
		shentsize, shnum = int(r.bo.Uint16(hdr[58:])), int(r.bo.Uint16(hdr[60:]))
	} else {
		phoff, shoff = uint64(r.bo.Uint32(hdr[28:])), uint64(r.bo.Uint32(hdr[32:]))
		phentsize, phnum = int(r.bo.Uint16(hdr[42:])), int(r.bo.Uint16(hdr[44:]))
		shentsize, shnum = int(r.bo.Uint16(hdr[46:])), int(r.bo.Uint16(hdr[48:]))
	}

	if phnum > 0 {
		if phentsize < r.pick(32, 56) {
			return File{}, formatErr("program header size %d", phentsize)
		}
		ph, err := r.table(phoff, phentsize, phnum, "program headers")
		if err != nil {
			return File{}, err
		}
		for i := range phnum {
			if r.bo.Uint32(ph[i*phentsize:]) == 3 { // PT_INTERP
				out.Interp = true
			}
		}
	}

	if shnum == 0 {
		return out, nil
	}
	shSize := r.pick(40, 64)
	if shentsize < shSize {
		return File{}, formatErr("section header size %d", shentsize)
	}
	sh, err := r.table(shoff, shentsize, shnum, "section headers")
	if err != nil {
		return File{}, err
	}
	section := func(i int) (typ uint32, off, size uint64, link uint32) {
		s := sh[i*shentsize:]
		if r.is64 {
			return r.bo.Uint32(s[4:]), r.bo.Uint64(s[24:]), r.bo.Uint64(s[32:]), r.bo.Uint32(s[40:])
		}
		return r.bo.Uint32(s[4:]), uint64(r.bo.Uint32(s[16:])), uint64(r.bo.Uint32(s[20:])), r.bo.Uint32(s[24:])
	}
	dyn := -1
	for i := range shnum {
		if typ, _, _, _ := section(i); typ == 6 { // SHT_DYNAMIC
			dyn = i
			break
		}
	}
	if dyn < 0 {
		return out, nil
	}
	// Like debug/elf's DynString and DynValue, a dynamic section or string
	// table that cannot be read leaves the values unknown rather than the
	// file damaged.
	_, off, size, link := section(dyn)
	entSize := r.pick(8, 16)
	if size > maxDynamic || size%uint64(entSize) != 0 {
		return out, nil
	}
	data := make([]byte, size)
	if err := readFull(f, data, off, "dynamic section"); err != nil {
		return out, ioOnly(err)
	}
	var soname uint64
	var haveSoname, haveFlags1 bool
	for i := 0; i+entSize <= len(data); i += entSize {
		var tag, val uint64
		if r.is64 {
			tag, val = r.bo.Uint64(data[i:]), r.bo.Uint64(data[i+8:])
		} else {
			tag, val = uint64(r.bo.Uint32(data[i:])), uint64(r.bo.Uint32(data[i+4:]))
		}
		switch {
		case tag == 14 && !haveSoname: // DT_SONAME
			soname, haveSoname = val, true
		case tag == 0x6ffffffb && !haveFlags1: // DT_FLAGS_1
			out.Flags1, haveFlags1 = val, true
		}
	}
	if !haveSoname || link == 0 || int(link) >= shnum {
		return out, nil
	}
	strTyp, strOff, strSize, _ := section(int(link))
	if strTyp != 3 || soname >= strSize { // SHT_STRTAB
		return out, nil
	}
	buf := make([]byte, min(strSize-soname, maxString))
	if err := readFull(f, buf, strOff+soname, "DT_SONAME"); err != nil {
		return out, ioOnly(err)
	}
	if end := bytes.IndexByte(buf, 0); end >= 0 {
		out.Soname = string(buf[:end])
	}
	return out, nil
}

// ioOnly passes on a read error but not a file too short for what it
// claims.
func ioOnly(err error) error {
	var fe *FormatError
	if errors.As(err, &fe) {
		return nil
	}
	return err
}

type reader struct {
	f    io.ReaderAt
	bo   binary.ByteOrder
	is64 bool
}

func (r reader) pick(size32, size64 int) int {
	if r.is64 {
		return size64
	}
	return size32
}

// table reads num entries of entsize bytes at off.
func (r reader) table(off uint64, entsize, num int, what string) ([]byte, error) {
	if entsize*num > maxTable {
		return nil, formatErr("%d %s of %d bytes each", num, what, entsize)
	}
	b := make([]byte, entsize*num)
	return b, readFull(r.f, b, off, what)
}

// readFull fills b from f at off; a file too short is a *FormatError.
func readFull(f io.ReaderAt, b []byte, off uint64, what string) error {
	if off > 1<<62 {
		return formatErr("%s at offset %d", what, off)
	}
	n, err := f.ReadAt(b, int64(off))
	if n == len(b) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		return &FormatError{msg: fmt.Sprintf("%s at offset %d: file ends first", what, off), err: io.ErrUnexpectedEOF}
	}
	return fmt.Errorf("read %s: %w", what, err)
}

// FormatError says what is wrong in a damaged ELF file.
type FormatError struct {
	msg string
	err error
}

func (e *FormatError) Error() string { return e.msg }
func (e *FormatError) Unwrap() error { return e.err }

func formatErr(format string, args ...any) error {
	return &FormatError{msg: fmt.Sprintf(format, args...)}
}
