// Command emptyhook is the floor of any Go hook: it reads the state runc
// writes on its stdin and exits. bench-start runs it as a prestart hook
// beside the real one, so the cost of starting a Go program from runc is
// measured in the same run as the hook, on the same machine.
package main

import (
	"io"
	"os"
)

func main() { _, _ = io.Copy(io.Discard, os.Stdin) }
