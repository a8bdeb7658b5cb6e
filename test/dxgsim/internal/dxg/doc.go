// Package dxg emulates the WSL2 dxgkrnl driver and the Windows host behind it
// for the five /dev/dxg ioctls that adapter enumeration uses
// (OPENADAPTERFROMLUID, QUERYADAPTERINFO, ENUMADAPTERS2, CLOSEADAPTER,
// ENUMADAPTERS3), answering from a simhost.Profile.
//
// It is written from ../../shared/reference/dxg-uapi.md alone and shares no
// code with pkg/host/dxcore, so an ABI mistake in the client is not cancelled by
// the same mistake here.
//
// The model has two layers, like the real system: host.go is the Windows
// side (it answers QUERYADAPTERINFO with an NTSTATUS and a payload) and
// kernel.go is the Linux driver (argument checks, per-process handle tables,
// NTSTATUS to errno translation, the ADAPTERTYPE bits the driver rewrites).
//
// Kernel.Ioctl reads everything it needs from the caller's memory first,
// then asks the caller of Ioctl whether the request is still live, and only
// then changes state or writes memory. That ordering is what makes it safe
// behind seccomp user notification, where the calling thread can be killed
// and its pid reused while the request is in flight.
//
// Misuse that the real driver would punish silently (an ENUMADAPTERS3 fill
// buffer smaller than the adapter count, handles never closed) is recorded,
// not hidden, so tests fail on it.
//
// The package performs no system calls; the supervisor supplies caller
// identity and memory access.
package dxg
