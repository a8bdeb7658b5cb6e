// Package privileged gates the tests that change the machine: they mount,
// make device nodes, create cgroups, load BPF programs or install seccomp
// listeners. They run only when asked, with WSL_GPU_HOOK_PRIVILEGED=1 (as
// `make test` sets it) and as root, so `make unit` runs the same tests as
// root as it does as any user, and touches nothing on the machine.
// InPrivateMountNS keeps what such a test mounts off the machine.
package privileged

import (
	"os"
	"testing"
)

// Env is the variable that asks for privileged tests.
const Env = "WSL_GPU_HOOK_PRIVILEGED"

// Require skips t unless privileged tests were asked for and the test runs
// as root. what says what the test does that needs it ("mounts a tmpfs").
func Require(t testing.TB, what string) {
	t.Helper()
	if reason := Skip(what); reason != "" {
		t.Skip(reason)
	}
}

// Skip is why a privileged test that does what must not run here, "" when
// it may: for TestMain and helpers that decide before a *testing.T exists.
func Skip(what string) string {
	switch {
	case os.Getenv(Env) != "1":
		return "privileged (" + what + "): runs only with " + Env + "=1 as root, as `make test` does"
	case os.Geteuid() != 0:
		return "needs root (" + what + ")"
	}
	return ""
}
