// Package k8s tests the device plugin against a real kubelet on the
// simulated WSL host. It is a module of its own: the kubelet is built from
// k8s.io/kubernetes v1.34.4, whose k8s.io/* staging modules are pinned here
// with replace directives to v0.34.4, and none of that touches the main
// module's dependency graph (the main module's binaries are built with
// `go build` from ../..).
//
// Run as root: `make k8s`, or `go test -timeout 60m ./...` here. The first run
// builds the kubelet into /var/cache/wsl-gpu-hook-e2e/engines/kubelet-v1.34.4
// ($KUBELET names a prebuilt one); containerd 2.4 comes from
// hack/engines/build.sh.
//
// The kubelet runs standalone: no API server, static pods from a manifest
// dir. That is enough because the kubelet admits pods against the node it
// computes itself when it has no API server (getNodeAnyWay -> initialNode ->
// setNodeStatus, which includes the device plugins' capacity), its device
// manager allocates before the predicate check, its read-only port serves
// static pods' status (/pods), and the pod-resources socket says what it
// can allocate (GetAllocatableResources: healthy devices) and what each pod
// holds (List). No etcd, no kube-apiserver.
//
// Isolation: containerd runs under dxgsim in a private mount namespace with
// its own root, state, socket and a tmpfs /run; the kubelet in another,
// where /run, /var/log and /var/lib are tmpfs, its fixed device plugin dir
// /var/lib/kubelet/device-plugins is a bind mount of the test's, and the
// sysctls it would otherwise set on the host (panic_on_oops, overcommit)
// are read-only files holding the values it wants. Pods run under the
// cgroup parent /<test dir name> (cgroupfs driver; this machine is cgroup
// v1), hostNetwork (there is no CNI), and teardown stops every sandbox over
// CRI, every daemon, kills what is left in the cgroups and removes them.
package k8s
