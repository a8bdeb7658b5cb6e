// Command gpu-worker stands for a GPU application in tests: it opens the
// dxg device given as its argument (becoming a dxg process, as a CUDA or
// D3D12 program does), prints "ready" and holds the device until its stdin
// closes. Under dxgsim, the workload model gives the process named
// gpu-worker its modelled memory use.
//
//	gpu-worker DXG-DEVICE [NAME]
//
// With NAME it then renames itself (its /proc/PID/comm, at most 15 bytes,
// any bytes) as any process may: dxgsim keeps the name the process had at
// its first dxg call, so the renamed worker keeps the model's figures
// while readers of /proc see NAME.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/host/dxcore"
)

func main() {
	if len(os.Args) != 2 && len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: gpu-worker DXG-DEVICE [NAME]")
		os.Exit(2)
	}
	s, err := dxcore.OpenSession(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "gpu-worker:", err)
		os.Exit(1)
	}
	if len(os.Args) == 3 {
		// /proc/self is the thread group's leader, whose comm ps and
		// /proc/PID/comm show, whichever thread writes it.
		if err := os.WriteFile("/proc/self/comm", []byte(os.Args[2]), 0); err != nil {
			fmt.Fprintln(os.Stderr, "gpu-worker: rename:", err)
			os.Exit(1)
		}
	}
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin)
	s.Close()
}
