// Package nodelabels labels a Kubernetes node with what its WSL GPUs are,
// the way GPU feature discovery labels NVIDIA nodes, without PCI (on WSL,
// PCI discovery sees only the Hyper-V bus): wsl-gpu-hook.dev/wsl,
// .../present, .../adapters, .../vendors, .../wddm, .../compute-only and
// per vendor .../<vendor>.count, .wddm, .compute-only and .driver (the
// driver store folder: inf name and the hash that changes with each
// driver). Labels computes them from an inventory; Client patches them
// onto the node with the pod's service account (RBAC: patch on nodes; the
// chart's admission policy narrows that to the pod's own node and to
// labels under wsl-gpu-hook.dev/) and takes away labels of ours the node
// should no longer carry; Labeler keeps them current from each inventory
// and takes them off at the chart's uninstall, not at a restart.
package nodelabels
