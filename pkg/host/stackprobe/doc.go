// Package stackprobe looks on the WSL host for what the vendor stacks and
// capabilities need beyond the driver store (package vendorstack decides
// what to do with it): the host's ROCm install (librocdxg, dids.conf),
// WSL's /dev/dri nodes and WSLg's sockets.
//
// It is apart from vendorstack so the decision does no I/O (docs'
// TestDecisionsDoNoIO holds it to that). It runs on every container start,
// so For probes only what a request needs, stats without following what
// it need not, and links no regexp (vendorstack's TestLinksNoRegexp).
package stackprobe
