package main

import (
	"sync"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/test/hostdelay"
)

// counter counts requests by opcode and delays each one that waits for an
// answer.
type counter struct {
	latency time.Duration
	mu      sync.Mutex
	counts  map[string]uint64
}

func newCounter(latency time.Duration) *counter {
	return &counter{latency: latency, counts: map[string]uint64{}}
}

// trip is one request the kernel waits on: counted, then delayed.
func (c *counter) trip(op string) {
	c.mu.Lock()
	c.counts[op]++
	c.counts["total"]++
	c.mu.Unlock()
	// Not time.Sleep, which makes 100 µs a millisecond (see hostdelay).
	hostdelay.Wait(c.latency)
}

// note counts a request nobody waits on (FORGET).
func (c *counter) note(op string) {
	c.mu.Lock()
	c.counts[op]++
	c.mu.Unlock()
}

// take returns the counts and starts again.
func (c *counter) take() map[string]uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.counts
	c.counts = map[string]uint64{"total": 0}
	return out
}

// slowFS is a read-only file system's every reading request, each a round
// trip. Writing requests never arrive: the mount is read-only.
type slowFS struct {
	fuse.RawFileSystem
	c *counter
}

func (f *slowFS) Lookup(cancel <-chan struct{}, h *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	f.c.trip("LOOKUP")
	return f.RawFileSystem.Lookup(cancel, h, name, out)
}

func (f *slowFS) Forget(nodeid, nlookup uint64) {
	f.c.note("FORGET")
	f.RawFileSystem.Forget(nodeid, nlookup)
}

func (f *slowFS) GetAttr(cancel <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	f.c.trip("GETATTR")
	return f.RawFileSystem.GetAttr(cancel, in, out)
}

func (f *slowFS) Statx(cancel <-chan struct{}, in *fuse.StatxIn, out *fuse.StatxOut) fuse.Status {
	f.c.trip("STATX")
	return f.RawFileSystem.Statx(cancel, in, out)
}

func (f *slowFS) Readlink(cancel <-chan struct{}, h *fuse.InHeader) ([]byte, fuse.Status) {
	f.c.trip("READLINK")
	return f.RawFileSystem.Readlink(cancel, h)
}

func (f *slowFS) Access(cancel <-chan struct{}, in *fuse.AccessIn) fuse.Status {
	f.c.trip("ACCESS")
	return f.RawFileSystem.Access(cancel, in)
}

func (f *slowFS) GetXAttr(cancel <-chan struct{}, h *fuse.InHeader, attr string, dest []byte) (uint32, fuse.Status) {
	f.c.trip("GETXATTR")
	return f.RawFileSystem.GetXAttr(cancel, h, attr, dest)
}

func (f *slowFS) ListXAttr(cancel <-chan struct{}, h *fuse.InHeader, dest []byte) (uint32, fuse.Status) {
	f.c.trip("LISTXATTR")
	return f.RawFileSystem.ListXAttr(cancel, h, dest)
}

func (f *slowFS) Open(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	f.c.trip("OPEN")
	return f.RawFileSystem.Open(cancel, in, out)
}

func (f *slowFS) Read(cancel <-chan struct{}, in *fuse.ReadIn, buf []byte) (fuse.ReadResult, fuse.Status) {
	f.c.trip("READ")
	return f.RawFileSystem.Read(cancel, in, buf)
}

func (f *slowFS) Lseek(cancel <-chan struct{}, in *fuse.LseekIn, out *fuse.LseekOut) fuse.Status {
	f.c.trip("LSEEK")
	return f.RawFileSystem.Lseek(cancel, in, out)
}

func (f *slowFS) Flush(cancel <-chan struct{}, in *fuse.FlushIn) fuse.Status {
	f.c.trip("FLUSH")
	return f.RawFileSystem.Flush(cancel, in)
}

func (f *slowFS) Release(cancel <-chan struct{}, in *fuse.ReleaseIn) {
	f.c.trip("RELEASE")
	f.RawFileSystem.Release(cancel, in)
}

func (f *slowFS) OpenDir(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	f.c.trip("OPENDIR")
	return f.RawFileSystem.OpenDir(cancel, in, out)
}

func (f *slowFS) ReadDir(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	f.c.trip("READDIR")
	return f.RawFileSystem.ReadDir(cancel, in, out)
}

func (f *slowFS) ReadDirPlus(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	f.c.trip("READDIRPLUS")
	return f.RawFileSystem.ReadDirPlus(cancel, in, out)
}

func (f *slowFS) ReleaseDir(in *fuse.ReleaseIn) {
	f.c.trip("RELEASEDIR")
	f.RawFileSystem.ReleaseDir(in)
}

func (f *slowFS) StatFs(cancel <-chan struct{}, h *fuse.InHeader, out *fuse.StatfsOut) fuse.Status {
	f.c.trip("STATFS")
	return f.RawFileSystem.StatFs(cancel, h, out)
}
