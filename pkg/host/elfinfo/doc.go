// Package elfinfo reads the few facts about an ELF file that tell a shared
// library from a program: its type, its DT_SONAME, its DT_FLAGS_1 and
// whether it asks for an interpreter (PT_INTERP).
//
// It exists so the hook does not link debug/elf, which brings
// compress/flate, compress/zlib, zstd, debug/dwarf and hash/crc32 and their
// initialisation into every container start for what is a cold-path
// report. It reads what debug/elf reads for the same answers (the dynamic
// section found by section type, its linked string table), of either class
// and byte order, and nothing else. Every offset and size in the file is
// checked before use and every buffer is capped: a file under a container's
// or a driver's control may claim anything.
package elfinfo
