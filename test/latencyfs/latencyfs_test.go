package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestCountsAndDelays mounts a directory and checks that a stat and a read
// reach the server, each request counted and delayed (root and /dev/fuse
// needed).
func TestCountsAndDelays(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skip("no /dev/fuse")
	}
	src, mnt := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "lib.so"), []byte("elf"), 0o444); err != nil {
		t.Fatal(err)
	}
	const lat = 5 * time.Millisecond
	c := newCounter(lat)
	s, err := mount(src, mnt, c)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Unmount()
	c.take()
	start := time.Now()
	for range 2 { // the second read must reach the server too, as on 9p
		data, err := os.ReadFile(filepath.Join(mnt, "lib.so"))
		if err != nil || string(data) != "elf" {
			t.Fatalf("read through the mount: %q, %v", data, err)
		}
	}
	took := time.Since(start)
	got := c.take()
	for _, op := range []string{"LOOKUP", "OPEN", "READ"} {
		if got[op] != 2 {
			t.Errorf("%s counted %d times, want 2 (counts %v)", op, got[op], got)
		}
	}
	if min := time.Duration(got["total"]-got["RELEASE"]) * lat; took < min {
		t.Errorf("two reads took %v, less than their %d waited-on requests' latency %v", took, got["total"]-got["RELEASE"], min)
	}
	if err := os.WriteFile(filepath.Join(mnt, "x"), nil, 0o644); err == nil {
		t.Errorf("wrote into the read-only mount")
	}
}
