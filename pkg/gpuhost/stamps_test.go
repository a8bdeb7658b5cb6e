package gpuhost

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/probecache"
)

// TestStartStampsSideBySide: the stats of the lib dir and the drivers dir
// are in flight together (on WSL each waits on the Windows host), and the
// stamps and errors come back in the order of the dirs. Each fake stat
// waits until every stat has started: asked one after the other, the
// first would wait for good, so the test fails on its deadline.
func TestStartStampsSideBySide(t *testing.T) {
	errLib := errors.New("lib dir gone")
	errDrivers := errors.New("drivers dir gone")
	for _, tc := range []struct {
		name    string
		fail    map[string]error
		wantErr error
	}{
		{name: "both stamps"},
		{name: "first error in the order of the dirs", fail: map[string]error{"lib": errLib, "drivers": errDrivers}, wantErr: errLib},
		{name: "second dir fails", fail: map[string]error{"drivers": errDrivers}, wantErr: errDrivers},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dirs := []string{"lib", "drivers"}
			var started sync.WaitGroup
			started.Add(len(dirs))
			all := make(chan struct{})
			go func() { started.Wait(); close(all) }()
			stat := func(dir string) (probecache.Stamp, error) {
				started.Done()
				select {
				case <-all:
				case <-time.After(10 * time.Second):
					return probecache.Stamp{}, errors.New("stat waited alone: the stats are not in flight together")
				}
				return probecache.Stamp{Ino: uint64(len(dir))}, tc.fail[dir]
			}
			got, err := startStamps(stat, dirs...)()
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("error %v, want %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			for i, dir := range dirs {
				if got[i].Ino != uint64(len(dir)) {
					t.Errorf("stamp %d is %+v, want the one of %s", i, got[i], dir)
				}
			}
		})
	}
}
