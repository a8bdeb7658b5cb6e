package main

import (
	"fmt"
	"io"
	"os"
)

// Exit statuses of dxgsim itself, following env(1) and timeout(1).
const (
	exitMisuse   = 3   // CMD succeeded but misused the driver
	exitSetup    = 125 // dxgsim could not start the simulation
	exitNoExec   = 126 // CMD exists but cannot be executed
	exitNotFound = 127 // CMD was not found
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == shimArg {
		os.Exit(shim(os.Args[2:], os.Stderr))
	}
	os.Exit(run(os.Args[1:], os.Stderr))
}

// fail prints dxgsim's one error line.
func fail(stderr io.Writer, err error) int {
	fmt.Fprintf(stderr, "dxgsim: %v\n", err)
	return exitSetup
}
