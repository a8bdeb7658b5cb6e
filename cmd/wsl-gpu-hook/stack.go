package main

// growStack makes the calling goroutine's stack 32 KiB in one step, by
// calling a function whose frame needs that much; nothing in the frame is
// written, so no page of it is touched.
//
// Why: a goroutine's stack starts at 2 KiB and doubles each time a call
// needs more, and each doubling copies the stack and walks every frame on
// it to adjust its pointers, which in a fresh process means faulting in
// the stack maps of each function on the way. A hook start goes deep enough
// (the configuration's parser, the state and config.json decoders, fmt)
// to double four times on its main goroutine. One growth up front replaces
// them. The stack never shrinks back during a start: only a garbage
// collection shrinks stacks, and a hook start runs none.
//
// TestGrowStack holds the frame to its size: a compiler that dropped the
// unused array would make this a no-op.
func growStack() { grownFrame(false) }

// grownFrame's frame holds a 24 KiB array that only write ever touches;
// with the 2 KiB the caller may use already, the runtime doubles the stack
// to 32 KiB before the function runs.
//
//go:noinline
func grownFrame(write bool) byte {
	if write {
		var b [24 << 10]byte
		return use(b[:])
	}
	return 0
}

//go:noinline
func use(b []byte) byte { return b[len(b)-1] }
