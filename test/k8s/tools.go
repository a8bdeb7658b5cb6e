//go:build tools

// Package k8s holds the kubelet end-to-end tests; this file pins the kubelet
// command so `go build k8s.io/kubernetes/cmd/kubelet` resolves inside this module.
package k8s

import _ "k8s.io/kubernetes/cmd/kubelet"
