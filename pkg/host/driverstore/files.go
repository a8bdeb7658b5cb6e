package driverstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/elfinfo"
)

// FileKind says what a listed file is to the Linux side.
type FileKind int

// File kinds ListFiles reports.
const (
	SharedObject FileKind = iota + 1 // ELF library, loadable with dlopen
	Executable                       // ELF program (nvidia-smi)
	Data                             // a Linux-side data file (nvcubins.bin)
)

func (k FileKind) String() string {
	switch k {
	case SharedObject:
		return "shared-object"
	case Executable:
		return "executable"
	case Data:
		return "data"
	}
	return fmt.Sprintf("FileKind(%d)", int(k))
}

// File is one Linux-side file of the lib dir or a driver store folder.
type File struct {
	Name   string
	Kind   FileKind
	Soname string // DT_SONAME of a shared object; "" if it has none
}

// linuxData are the non-ELF files the Linux side of a driver reads.
var linuxData = map[string]bool{"nvcubins.bin": true}

// ListFiles lists the files of dir that matter on Linux, by name: ELF shared
// objects and executables (only their headers and dynamic section are read;
// nothing is run) and known data files. Files are opened with O_NOFOLLOW. Windows files, symlinks and
// subdirectories are left out. A driver store folder can hold hundreds of
// files, so this is for reports, not for every container start.
func ListFiles(dir string) ([]File, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	var files []File
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		if linuxData[e.Name()] {
			files = append(files, File{Name: e.Name(), Kind: Data})
			continue
		}
		f, ok, err := elfFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		if ok {
			f.Name = e.Name()
			files = append(files, f)
		}
	}
	return files, nil
}

// elfFile classifies p if it is an ELF shared object or executable.
func elfFile(p string) (File, bool, error) {
	fd, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return File{}, false, fmt.Errorf("open %s: %w", p, err)
	}
	defer fd.Close()
	ef, err := elfinfo.Read(fd)
	var damaged *elfinfo.FormatError
	switch {
	case errors.Is(err, elfinfo.ErrNotELF):
		return File{}, false, nil
	case errors.As(err, &damaged):
		return File{}, false, fmt.Errorf("%s is a damaged ELF file: %w", p, err)
	case err != nil:
		return File{}, false, fmt.Errorf("read %s: %w", p, err)
	}
	f := File{Soname: ef.Soname}
	switch ef.Type {
	case elfinfo.TypeExec:
		f.Kind = Executable
	case elfinfo.TypeDyn:
		f.Kind = SharedObject
		if isPIE(ef) {
			f.Kind = Executable
		}
	default:
		return File{}, false, nil // object files, core dumps
	}
	return f, true, nil
}

// isPIE tells a position-independent executable from a library (both are
// ET_DYN): the linker marks PIEs with DF_1_PIE; older ones are told by an
// interpreter and no SONAME.
func isPIE(ef elfinfo.File) bool {
	if ef.Flags1&elfinfo.DF1PIE != 0 {
		return true
	}
	return ef.Soname == "" && ef.Interp
}

// NvidiaSmi says where the host has an executable nvidia-smi.
type NvidiaSmi struct {
	// InLibDir: in the lib dir, where current WSL drivers put it.
	InLibDir bool
	// Folders are the NVIDIA driver store folders holding one (older
	// drivers), by their Inventory name; only looked at when the lib dir
	// has none.
	Folders []string
}

// FindNvidiaSmi looks for nvidia-smi in the lib dir, and when it is not
// there in inv's NVIDIA folders. It costs one stat on a current host.
func FindNvidiaSmi(inv *Inventory) NvidiaSmi {
	var n NvidiaSmi
	if isExecutable(filepath.Join(inv.LibDir, "nvidia-smi")) {
		n.InLibDir = true
		return n
	}
	for _, f := range inv.Folders {
		if f.Vendor == NVIDIA && isExecutable(filepath.Join(f.HostPath, "nvidia-smi")) {
			n.Folders = append(n.Folders, f.Name)
		}
	}
	return n
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}
