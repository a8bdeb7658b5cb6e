package ldcache

import (
	"debug/elf"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// ScanDir returns the entries ldconfig would make for the x86_64 shared
// objects in hostDir, with paths under containerDir where the container
// sees the same files. The key is the library's SONAME (its file name when
// it has none); the path names the file called like the key when there is
// one, so WSL's three identical libcuda.so, libcuda.so.1, libcuda.so.1.1
// become one entry libcuda.so.1 -> containerDir/libcuda.so.1.
// Only ELF headers and the dynamic section are read, never whole files.
func ScanDir(hostDir, containerDir string) ([]Entry, error) {
	des, err := os.ReadDir(hostDir)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", hostDir, err)
	}
	names := map[string]bool{}
	for _, de := range des {
		names[de.Name()] = true
	}
	byKey := map[string]string{} // key -> file name
	for _, de := range des {
		name := de.Name()
		// ldconfig's own filter: lib*.so*, regular files or links to them.
		if !strings.HasPrefix(name, "lib") || !strings.Contains(name, ".so") {
			continue
		}
		key, ok := soname(filepath.Join(hostDir, name))
		if !ok {
			continue
		}
		if key == "" {
			key = name
		}
		if prev, seen := byKey[key]; seen && (prev == key || name != key) {
			continue
		}
		byKey[key] = name
	}
	entries := make([]Entry, 0, len(byKey))
	for key, name := range byKey {
		if names[key] {
			name = key
		}
		entries = append(entries, Entry{Key: key, Path: path.Join(containerDir, name), Flags: FlagX8664Libc6})
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Key < entries[j].Key })
	return entries, nil
}

// soname reports the DT_SONAME of an x86_64 shared object ("" when it has
// none) and false for anything else.
func soname(p string) (string, bool) {
	f, err := elf.Open(p)
	if err != nil {
		return "", false
	}
	defer f.Close()
	if f.Class != elf.ELFCLASS64 || f.Machine != elf.EM_X86_64 || f.Type != elf.ET_DYN {
		return "", false
	}
	names, err := f.DynString(elf.DT_SONAME)
	if err != nil || len(names) == 0 {
		return "", true
	}
	return names[0], true
}
