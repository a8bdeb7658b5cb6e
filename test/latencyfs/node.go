package main

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// newRoot is a loopback of src whose files are read through the server.
// go-fuse's loopback hands open files to the kernel (FUSE passthrough,
// Linux 6.9+), after which reads never reach the server: nothing like 9p,
// where every read is a round trip. Its files are wrapped so they offer no
// passthrough fd.
func newRoot(src string) (fs.InodeEmbedder, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(src, &st); err != nil {
		return nil, err
	}
	r := &fs.LoopbackRoot{Path: src, Dev: st.Dev}
	r.NewNode = func(r *fs.LoopbackRoot, _ *fs.Inode, _ string, _ *syscall.Stat_t) fs.InodeEmbedder {
		return &node{fs.LoopbackNode{RootData: r}}
	}
	r.RootNode = r.NewNode(r, nil, "", &st)
	return r.RootNode, nil
}

type node struct{ fs.LoopbackNode }

var _ = (fs.NodeOpener)((*node)(nil))

func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	fh, ff, errno := n.LoopbackNode.Open(ctx, flags)
	if errno != 0 {
		return nil, 0, errno
	}
	return &file{fh}, ff, 0
}

// file is an open loopback file without PassthroughFd.
type file struct{ fh fs.FileHandle }

func (f *file) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	return f.fh.(fs.FileReader).Read(ctx, dest, off)
}

func (f *file) Release(ctx context.Context) syscall.Errno {
	return f.fh.(fs.FileReleaser).Release(ctx)
}

func (f *file) Flush(ctx context.Context) syscall.Errno {
	return f.fh.(fs.FileFlusher).Flush(ctx)
}

func (f *file) Getattr(ctx context.Context, out *fuse.AttrOut) syscall.Errno {
	return f.fh.(fs.FileGetattrer).Getattr(ctx, out)
}

func (f *file) Lseek(ctx context.Context, off uint64, whence uint32) (uint64, syscall.Errno) {
	return f.fh.(fs.FileLseeker).Lseek(ctx, off, whence)
}
