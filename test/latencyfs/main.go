package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

func main() {
	latency := flag.Duration("latency", 100*time.Microsecond, "delay of every request that waits for an answer")
	control := flag.String("control", "", "unix socket `PATH` where each connection reads the counts since the last one (required)")
	flag.Parse()
	if err := run(*latency, *control, flag.Args()); err != nil {
		fmt.Fprintf(os.Stderr, "latencyfs: %v\n", err)
		os.Exit(1)
	}
}

func run(latency time.Duration, control string, mounts []string) error {
	if control == "" || len(mounts) == 0 {
		return errors.New("usage: latencyfs --latency D --control SOCK SRC:MNT [SRC:MNT...]")
	}
	c := newCounter(latency)
	var servers []*fuse.Server
	defer func() {
		for _, s := range servers {
			_ = s.Unmount()
		}
	}()
	for _, m := range mounts {
		src, mnt, ok := strings.Cut(m, ":")
		if !ok {
			return fmt.Errorf("mount %q: want SRC:MNT", m)
		}
		s, err := mount(src, mnt, c)
		if err != nil {
			return fmt.Errorf("mount %s at %s: %w", src, mnt, err)
		}
		servers = append(servers, s)
	}
	_ = os.Remove(control)
	l, err := net.Listen("unix", control)
	if err != nil {
		return err
	}
	defer l.Close()
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			data, _ := json.Marshal(c.take())
			_, _ = conn.Write(append(data, '\n'))
			conn.Close()
		}
	}()
	// Ready: the mounts answer and the socket listens.
	fmt.Println("ready")
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	<-sigs
	return nil
}

func mount(src, mnt string, c *counter) (*fuse.Server, error) {
	root, err := newRoot(src)
	if err != nil {
		return nil, err
	}
	var zero time.Duration
	opts := &fs.Options{
		EntryTimeout: &zero, AttrTimeout: &zero, NegativeTimeout: &zero,
		MountOptions: fuse.MountOptions{
			AllowOther: true, DirectMount: true, FsName: src, Name: "latencyfs",
			Options: []string{"ro"},
		},
	}
	raw := &slowFS{RawFileSystem: fs.NewNodeFS(root, opts), c: c}
	s, err := fuse.NewServer(raw, mnt, &opts.MountOptions)
	if err != nil {
		return nil, err
	}
	go s.Serve()
	if err := s.WaitMount(); err != nil {
		return nil, err
	}
	return s, nil
}
