// Command dxgcall is the empty Go hook plus the one /dev/dxg call a warm
// start of the hook makes: it reads the state on its stdin, opens the device
// given as its argument, lists the adapters' LUIDs (one ENUMADAPTERS3, as the
// hook's probe does when its cache answers) and exits. bench-start runs it
// beside the empty Go hook so that what that call costs on the simulated
// host (dxgsim's answer through seccomp, and on the latency host the
// process object the open makes on the Windows host) is measured apart
// from the hook's own work.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/dxcore"
)

func main() {
	_, _ = io.Copy(io.Discard, os.Stdin)
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: dxgcall DEVICE")
		os.Exit(2)
	}
	known := func([]dxcore.LUID) bool { return true }
	if _, err := dxcore.EnumerateWith(os.Args[1], dxcore.Options{CloseHandlesWithFD: true, Known: known}); err != nil {
		fmt.Fprintln(os.Stderr, "dxgcall:", err)
		os.Exit(1)
	}
}
