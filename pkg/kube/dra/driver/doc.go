// Package driver runs the decisions of package dra as a kubelet DRA plugin
// (k8s.io/dynamic-resource-allocation/kubeletplugin): it implements
// kubeletplugin.DRAPlugin, keeps the node's ResourceSlice and the devices'
// health current as the host's adapters change, writes and removes the
// claims' CDI specs and keeps the checkpoint.
//
// At start and at each re-list it rewrites, from the checkpoint, every
// prepared claim's spec and metadata file that is missing or differs from
// what the checkpoint records, one line per file: the kubelet prepares a
// claim once per pod, so a spec lost under a running pod would otherwise
// fail every later start of its containers ("unresolvable CDI devices"),
// and a lost metadata file the mount of it. Files of names the checkpoint
// does not record are never touched.
//
// Every gRPC call is serialized by the library; the Driver's own mutex
// also orders them against the refresh loop.
package driver
