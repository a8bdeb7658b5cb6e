package main

import (
	"runtime"
	"testing"
)

// TestGrowStack: growStack leaves a fresh goroutine (2 KiB of stack) with a
// stack of at least 32 KiB, in one allocation. It fails if the compiler
// drops the unused array from grownFrame's frame.
func TestGrowStack(t *testing.T) {
	for _, tc := range []struct {
		name string
		grow func()
		want uint64
	}{
		{"growStack", growStack, 32 << 10},
		{"nothing (the control)", func() {}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := make(chan uint64)
			go func() {
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				tc.grow()
				runtime.ReadMemStats(&after)
				got <- after.StackInuse - before.StackInuse
			}()
			grew := <-got
			if tc.want > 0 && grew < tc.want {
				t.Errorf("the goroutine's stacks grew by %d bytes, want at least %d", grew, tc.want)
			}
			if tc.want == 0 && grew >= 32<<10 {
				t.Errorf("the control grew the stacks by %d bytes: the measure cannot tell", grew)
			}
		})
	}
}
