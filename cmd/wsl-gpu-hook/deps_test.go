package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The hook runs on every container start and its start time is budgeted:
// the device plugin's gRPC and kubelet API live in their own binary, and
// `info --k8s` uses only the pure decision package. (fsnotify is linked
// anyway: the CDI module's spec cache, which doctor and install cdi load
// specs with as engines do, imports it; its init costs nothing measurable.)
func TestHookLinksNoGRPC(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		for _, banned := range []string{"google.golang.org/grpc", "google.golang.org/protobuf", "k8s.io/"} {
			if strings.HasPrefix(pkg, banned) {
				t.Errorf("wsl-gpu-hook links %s: keep it in cmd/wsl-gpu-device-plugin", pkg)
			}
		}
	}
}
