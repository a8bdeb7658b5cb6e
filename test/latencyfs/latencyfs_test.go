package main

import (
	"os"
	"path/filepath"
	"slices"
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

// TestRequestLatencyIsPrecise: a request charged WSL's 100 µs takes that
// long, seen from the caller, and not the millisecond time.Sleep made of
// it (the benchmark's latency host charged ten times its documented figure
// that way). Root and /dev/fuse needed.
func TestRequestLatencyIsPrecise(t *testing.T) {
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
	const lat = 100 * time.Microsecond
	// For the median of many requests, through the kernel and back:
	// generous for a loaded machine, far below time.Sleep's ~1 ms excess.
	const tolerance = 500 * time.Microsecond
	c := newCounter(lat)
	s, err := mount(src, mnt, c)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Unmount()
	f, err := os.Open(filepath.Join(mnt, "lib.so"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c.take()
	took := make([]time.Duration, 101)
	for i := range took {
		start := time.Now()
		if _, err := f.Stat(); err != nil { // no attribute cache: one GETATTR
			t.Fatal(err)
		}
		took[i] = time.Since(start)
	}
	if got := c.take(); got["GETATTR"] != uint64(len(took)) || got["total"] != uint64(len(took)) {
		t.Fatalf("%d stats made requests %v, want %d GETATTR and nothing else", len(took), got, len(took))
	}
	if low := slices.Min(took); low < lat {
		t.Errorf("a request took %v, less than its latency %v", low, lat)
	}
	slices.Sort(took)
	if med := took[len(took)/2]; med > lat+tolerance {
		t.Errorf("a request's median %v is more than %v over its latency %v", med, tolerance, lat)
	}
}
