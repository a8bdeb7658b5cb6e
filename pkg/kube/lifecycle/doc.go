// Package lifecycle decides what the stop of a node pod of the chart means
// for what the pod put on its node (the hook copy, the static CDI specs,
// every DRA claim's spec, the node's labels), and carries out the chart's
// uninstall.
//
// # Model
//
// A node pod stops for many reasons: a helm upgrade, a rollout restart, a
// drain, its deletion, an eviction, an OOM kill. Running GPU pods depend on
// what it put on the node (a container that restarts needs its CDI spec and
// the hook the spec names), so none of those stops may take it away. Only
// an uninstall may, and a pod cannot tell an uninstall from a restart by
// the signal it gets. It can tell by its DaemonSet: an uninstall deletes
// the DaemonSet; every other stop leaves it in place.
//
// The chart's pre-delete hook runs [Uninstall]: it deletes the DaemonSet
// (so the pods still have their API access when they stop: helm deletes
// the service account and RBAC only after its pre-delete hooks) and waits
// until the DaemonSet's pods are gone, so that `helm uninstall` returns
// with the nodes clean. Each node pod, when told to stop, asks [Decide]:
//
//   - the DaemonSet is gone, or being deleted: an uninstall; remove what
//     the pod recorded writing, and nothing else;
//   - the DaemonSet is there: a restart of some kind; keep everything;
//   - the API server cannot say (unreachable, the token already refused):
//     keep everything and say so. Files left behind cost nothing; files
//     taken away break running pods.
//
// A DaemonSet deleted by hand (`kubectl delete daemonset`) counts as an
// uninstall, as it stops keeping the specs current anyway.
package lifecycle
