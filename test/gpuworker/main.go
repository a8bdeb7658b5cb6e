// Command gpu-worker stands for a GPU application in tests: it opens the
// dxg device given as its argument (becoming a dxg process, as a CUDA or
// D3D12 program does), prints "ready" and holds the device until its stdin
// closes. Under dxgsim, the workload model gives the process named
// gpu-worker its modelled memory use.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/dxcore"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: gpu-worker DXG-DEVICE")
		os.Exit(2)
	}
	s, err := dxcore.OpenSession(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "gpu-worker:", err)
		os.Exit(1)
	}
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin)
	s.Close()
}
