// Package kubeapi is the few calls the device plugin makes to the
// Kubernetes API server, with the pod's service account: patch its node's
// labels, read its DaemonSet, delete it and list its pods at uninstall.
//
// It is a small REST client rather than client-go because those few calls
// are all the plugin makes, and client-go with its API types would about
// double the plugin's binary, which every node pulls. It does what matters
// of client-go's in-cluster configuration: the API server from the
// kubernetes Service's variables, its CA from the mounted ca.crt, and the
// token re-read from its file before every request, because the kubelet
// rotates projected service-account tokens (they expire; a token read once
// at start stops working after its lifetime).
//
// Answers other than 2xx are *StatusError values, so callers decide on the
// code (a 404 for a DaemonSet means it is gone) with errors.As.
package kubeapi
