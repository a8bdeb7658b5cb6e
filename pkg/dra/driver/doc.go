// Package driver runs the decisions of package dra as a kubelet DRA plugin
// (k8s.io/dynamic-resource-allocation/kubeletplugin): it implements
// kubeletplugin.DRAPlugin, keeps the node's ResourceSlice and the devices'
// health current as the host's adapters change, writes and removes the
// claims' CDI specs and keeps the checkpoint.
//
// Every gRPC call is serialized by the library; the Driver's own mutex
// also orders them against the refresh loop.
package driver
