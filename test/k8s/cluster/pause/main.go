// Command pause is the test cluster's sandbox image: it waits for SIGINT or
// SIGTERM and reaps children, as Kubernetes' pause does (`sleep` as PID 1
// ignores SIGTERM and every pod would take its full grace period to stop).
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sig := make(chan os.Signal, 4)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sig {
		if s != syscall.SIGCHLD {
			return
		}
		for {
			var ws syscall.WaitStatus
			if pid, _ := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil); pid <= 0 {
				break
			}
		}
	}
}
