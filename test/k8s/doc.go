// Package k8s tests the device plugin against a real kubelet on the
// simulated WSL host. It is a module of its own: the kubelet is built from
// k8s.io/kubernetes, whose k8s.io/* staging modules are pinned here with
// replace directives, and none of that touches the main module's graph.
//
// Run as root: go test -timeout 60m ./... (from this directory). The first
// run builds the kubelet into /var/cache/wsl-gpu-hook-e2e/engines; containerd
// comes from hack/engines/build.sh.
package k8s
