// Command latencyfs serves directories through FUSE with a delay on every
// request, and counts the requests: the simulated WSL host's lib dir and
// driver store as WSL serves them, over 9p from a file server on Windows,
// where each lookup, getattr, open, read, readdir and close is a round trip
// across the VM boundary.
//
//	latencyfs --latency 100us --control SOCK SRC:MNT [SRC:MNT...]
//
// Each SRC is mounted read-only at MNT (a loopback of SRC) with the kernel's
// entry, attribute and negative caches off, as WSL's 9p mounts of the
// Windows folders have no attribute cache either: every path lookup and
// stat reaches the server. Each connection to the unix socket SOCK reads
// the requests counted since the previous connection, as one JSON object
// (by FUSE opcode, plus "total", the requests that wait for an answer), and
// starts the count again. SIGINT or SIGTERM unmounts and exits.
//
// It is a test tool (hack/benchstart runs it), in a module of its own
// because it uses github.com/hanwen/go-fuse/v2: the FUSE protocol is a
// library's job, and the main module's binaries must not link it.
package main
