// Package e2e holds the end-to-end tests of wsl-gpu-hook: real runc
// containers whose prestart hook is the real, statically built hook, on a
// simulated WSL2 host (dxgsim answers the /dev/dxg ioctls, a fixture tree
// stands in for /usr/lib/wsl).
//
// Every assertion is made from inside the container, the way a user would
// check: does /dev/dxg open, does dlopen("libcuda.so.1") work without
// LD_LIBRARY_PATH, is the driver folder read-only, does nvidia-smi run.
// Around every container the host is checked for leaks: its mount table,
// the WSL paths a hook must never create on the host, and the fixture tree
// must be exactly as before.
//
// The tests need root, runc, gcc (with static glibc) and debootstrap; they
// skip, saying why, when the host lacks them, and under -short. Root file
// systems are built once and cached under $E2E_CACHE (default
// /var/cache/wsl-gpu-hook-e2e); the first run needs Debian's package mirror
// for debootstrap. Run them with
//
//	go test ./test/e2e/...
//
// Set E2E_KEEP=1 to keep every container's work directory (bundle, hook
// config and log, dxgsim report) for debugging, E2E_KEEP=failed to keep
// those of failed tests only.
package e2e
