package ldcache

// What the loader cache holds on the machine this build runs on. WSL's lib
// dir and driver store hold libraries of the host's architecture only, and
// a container of another architecture could not load them: entries are
// made for this machine's libraries and loader.
const (
	// nativeMachine is e_machine EM_AARCH64: libraries of another machine
	// are skipped, as ldconfig skips them.
	nativeMachine = 183
	// FlagNative is the flags ldconfig records for this machine's
	// libraries: FLAG_ELF_LIBC6 | FLAG_AARCH64_LIB64 (glibc's
	// _DL_CACHE_DEFAULT_ID on aarch64).
	FlagNative = FlagAArch64Libc6
	// NativeLoader is where every glibc image of this machine keeps its
	// dynamic loader (AAPCS64's PT_INTERP; Debian and Ubuntu keep it in
	// /lib, a link to /usr/lib on merged-/usr systems).
	NativeLoader = "/lib/ld-linux-aarch64.so.1"
	// charSigned: C's char is unsigned in AAPCS64, so glibc's
	// _dl_cache_libcmp, which ldconfig sorts with and the loader searches
	// with, compares bytes above 0x7f as 128..255 there.
	charSigned = false
)
