// Package ldcache reads and writes glibc's dynamic loader cache
// (/etc/ld.so.cache), so the hook can register the WSL libraries with a
// container's loader without running any program from the image.
//
// Running the image's ldconfig as host root would execute a binary the
// image's author chose outside the container's confinement; running the
// host's ldconfig with -r costs about 5 ms, the hook's whole budget. The
// cache format is small and stable, so the hook merges its entries into the
// image's cache itself, in well under a millisecond.
//
// Format (glibc >= 2.32 writes only this "new" format; older caches carry an
// "ld.so-1.7.0" table in front, which Parse skips): a 48-byte header
// ("glibc-ld.so.cache" "1.1", entry count, string table length, endianness
// flags, extension offset), 24-byte entries {flags, key, value, osversion,
// hwcap} and a string table; string offsets count from the header. The
// loader binary-searches the entries, so they must be sorted exactly as
// ldconfig sorts them: descending by glibc's _dl_cache_libcmp, which
// compares runs of digits as numbers.
//
// What it does not do: write the extension section (so glibc-hwcaps
// variants of image libraries lose their entries and the loader uses the
// baseline builds), or handle anything but little-endian x86_64 libraries.
package ldcache
