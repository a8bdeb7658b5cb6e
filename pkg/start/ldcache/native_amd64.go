package ldcache

// What the loader cache holds on the machine this build runs on. WSL's lib
// dir and driver store hold libraries of the host's architecture only, and
// a container of another architecture could not load them: entries are
// made for this machine's libraries and loader.
const (
	// nativeMachine is e_machine EM_X86_64: libraries of another machine
	// are skipped, as ldconfig skips them.
	nativeMachine = 62
	// FlagNative is the flags ldconfig records for this machine's
	// libraries: FLAG_ELF_LIBC6 | FLAG_X8664_LIB64.
	FlagNative = FlagX8664Libc6
	// NativeLoader is where every glibc image of this machine keeps its
	// dynamic loader (the x86-64 psABI's PT_INTERP).
	NativeLoader = "/lib64/ld-linux-x86-64.so.2"
	// charSigned: C's char is signed in the x86-64 psABI, so glibc's
	// _dl_cache_libcmp, which ldconfig sorts with and the loader searches
	// with, compares bytes above 0x7f as negative.
	charSigned = true
)
