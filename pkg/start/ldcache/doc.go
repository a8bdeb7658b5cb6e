// Package ldcache reads and writes glibc's dynamic loader cache
// (/etc/ld.so.cache), so the hook can make a container's loader find
// libcuda.so.1, libdxcore.so and libd3d12.so in /usr/lib/wsl/lib without
// running any program from the image.
//
// Why not ldconfig: the hook runs as host root, and running the image's
// ldconfig would execute a binary the image's author chose; running the
// host's with -r costs about 5 ms, the hook's whole budget. Merging a
// handful of entries into the image's cache in Go takes a fraction of a
// millisecond and needs nothing from the image.
//
// The format (glibc sysdeps/generic/dl-cache.h, elf/cache.c, elf/dl-cache.c):
//
//   - A 48-byte header: "glibc-ld.so.cache" "1.1", nlibs, len_strings (all
//     little-endian uint32 on x86_64 and aarch64), a flags byte (2 = little-endian, 0 =
//     written before glibc 2.33), 3 bytes padding, extension_offset, 12
//     unused bytes.
//   - nlibs 24-byte entries {int32 flags; uint32 key, value; uint32
//     osversion; uint64 hwcap}. key and value are offsets of NUL-terminated
//     strings counted from the header, which is the file start except in
//     the old+new layout below.
//   - The string table. ldconfig stores each key as the tail of its path.
//   - At extension_offset (4-aligned, counted from the file start) an
//     extension directory: magic 0xeaa42174, count, and {tag, flags,
//     offset, size} sections: tag 0 the generator string `ldconfig -p`
//     prints, tag 1 an array of string offsets naming the glibc-hwcaps
//     subdirectories, sorted by strcmp. An entry whose hwcap is
//     1<<62 | ISA level<<32 | i lives in the subdirectory named by element i.
//
// Before glibc 2.32 ldconfig wrote the old "ld.so-1.7.0" format (16-byte
// header, 12-byte entries {flags, key, value}) with the new format hidden in
// its string table at the next 8-byte boundary; loaders then use only the
// new part. Merge reads all three layouts and writes only the new one,
// which every x86_64 and aarch64 glibc since 2.2 reads.
//
// Order is what makes a cache work: the loader binary-searches the entries
// with _dl_cache_libcmp (runs of digits compare as numbers, so
// libfoo.so.10 > libfoo.so.2), expecting them sorted in descending order,
// then scans the run of equal keys and takes the first entry whose flags
// match (0x0303 on x86_64, 0x0a03 on aarch64), glibc-hwcaps entries first.
// _dl_cache_libcmp compares C chars, which are signed on x86_64 and
// unsigned on aarch64, so a name with a byte above 0x7f sorts differently
// on each: the order follows the machine's. An entry out of place
// makes lookups of other names miss without any error. Merge sorts as
// ldconfig does and keeps the relative order of equal entries, which
// decides the loader's choice among them.
//
// What it does not do: it does not look into glibc-hwcaps subdirectories
// of the directory it scans (WSL ships none; entries of that kind already
// in an image's cache are kept), it handles the caches and libraries of the
// machine it is built for (native_amd64.go, native_arm64.go: WSL's lib dir
// holds that machine's libraries and nothing else), little-endian only,
// and it does not touch ld.so.conf, so an ldconfig run later inside
// the container rebuilds the cache without the hook's entries.
package ldcache
