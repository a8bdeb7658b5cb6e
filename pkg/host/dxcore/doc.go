// Package dxcore lists the GPU adapters a Windows host exposes to a WSL2 VM
// by speaking the dxg ioctls on /dev/dxg directly, in pure Go.
//
// # Model
//
// Enumerate opens the device, asks the kernel for the adapters
// (LX_DXENUMADAPTERS3 with compute-only adapters included, or
// LX_DXENUMADAPTERS2 on kernels that lack it), sends each adapter's queries
// through LX_DXQUERYADAPTERINFO to the Windows host, and returns plain
// values: LUID, WDDM version, type bits, PCI ids, description and the
// Windows path of the driver store folder. Nothing is cached between calls.
//
// Adapter handles belong to the process that opened the fd (the kernel
// checks the thread group id and answers ENOTTY to anyone else), and every
// enumerate call opens new ones. Enumerate closes each handle it got with
// LX_DXCLOSEADAPTER on every path, errors included, then closes the fd.
// The driver frees every handle of a process when the process's last dxg
// file is released, so a short-lived caller that holds no other /dev/dxg
// fd sets Options.CloseHandlesWithFD and leaves them to the fd's close.
//
// # Round trips
//
// Each ioctl is a system call; each QUERYADAPTERINFO is also a round trip
// to the Windows host over VMBus (the enumerate and close calls are
// answered by the Linux driver itself). Without Details, for N adapters:
// one ENUMADAPTERS3 fill, then per adapter PHYSICALADAPTERDEVICEIDS and
// one QUERYREGISTRY, plus N CLOSEADAPTER unless CloseHandlesWithFD.
//
// # ABI hazards the code is shaped around
//
//   - The ENUMADAPTERS3 fill call always passes a capacity of 64
//     (D3DKMT_ADAPTERS_MAX). With a capacity below the number of adapters,
//     real kernels write past their own buffer and leak handles. No count
//     query precedes it: the fill's ENOTTY (or EINVAL) tells a kernel
//     without the call as well as a count query would.
//   - ENUMADAPTERS2 refuses a capacity below the current count with
//     EOVERFLOW, so its count/fill pair is retried a few times.
//   - The driver store path is queried with QUERYREGISTRY in its raw layout
//     with 2-byte UTF-16 characters (552 bytes plus the value). NVIDIA's
//     struct uses 4-byte wchar_t and only works through libdxcore, which
//     converts; the host reads the 2-byte form. Its status field, not the
//     ioctl result, says whether the value fit. The first request leaves
//     room for 260 UTF-16 units, so a usual path comes back at once; a
//     longer one is asked for again with the size the host names.
//   - Very old drivers return a negative NTSTATUS as the ioctl result with
//     no errno; that is treated as failure and reported as NTSTATUS.
//
// Every structure is encoded into a []byte at the offsets of the kernel's
// include/uapi/misc/d3dkmthk.h; decoding is pure functions, and pointers to
// Go buffers inside an argument are pinned for the call. x86_64 and arm64
// lay every one of these structures out the same way (LP64, each scalar
// aligned to its size): layout_test.go derives the sizes and offsets from
// the header's shapes under the C rules of the architecture it runs on,
// and runs under both (make test-arm64).
//
// # Under an emulator
//
// qemu-user passes an ioctl to the kernel only if its own table knows the
// number, and the dxg numbers are not there: it answers them with ENOSYS
// ("Unsupported ioctl: cmd=0xffffffffc018473e" with -d unimp), so an arm64
// build run under qemu on x86_64 never reaches /dev/dxg. That is
// ErrEmulated, not ErrUnsupported: a kernel never answers an ioctl with
// ENOSYS, and updating WSL would not help. The arm64 tests check the
// device code through a test kernel that reads the argument bytes and user
// pointers as the kernel would, against the trace amd64 writes
// (wire_linux_test.go).
//
// # Statistics (Session)
//
// OpenSession keeps the device and one handle per adapter open for a
// long-lived reader. LX_DXQUERYSTATISTICS (0xC3284743, struct
// d3dkmt_querystatistics, 0x328 bytes) names the adapter by LUID and is
// forwarded to the host: ADAPTER (segment and node counts), SEGMENT (commit
// limit, committed, resident bytes, aperture), NODE (running time in 100 ns
// units) and PROCESS_SEGMENT_GROUP (a process's budget and usage). Its u64
// process field is a Linux pid on kernels with the pid lookup (the pid the
// process had in its own namespace when it opened /dev/dxg; EINVAL when no
// such dxg process exists) and 0 for the caller. LX_DXQUERYVIDEOMEMORYINFO
// (0xC038470A, 56 bytes) is the caller's own budget only: the kernel
// answers EINVAL for any other process. Node names and engine types come
// from QUERYADAPTERINFO(NODEMETADATA). Results are Windows' SDK layouts;
// decoders reject short replies and absurd sizes or counters. The hook never
// opens a Session.
//
// # What it never does
//
// It never loads libdxcore.so or libd3d12, never uses cgo, never opens
// adapters by LUID, creates devices or submits work, and never maps the
// Windows path to a Linux folder (package driverstore does that).
package dxcore
