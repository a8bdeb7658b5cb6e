// Package nodelabels labels a Kubernetes node with what its WSL GPUs are,
// the way GPU feature discovery labels NVIDIA nodes, without PCI (on WSL,
// PCI discovery sees only the Hyper-V bus): wsl-gpu-hook.dev/wsl,
// .../present, .../adapters, .../vendors, .../wddm, .../compute-only and
// per vendor .../<vendor>.count, .wddm, .compute-only and .driver (the
// driver store folder: inf name and the hash that changes with each
// driver). Labels computes them from an inventory; Client patches them
// onto the node with the pod's service account (RBAC: patch on nodes, and
// nothing else) and takes away labels of ours the node should no longer
// carry.
package nodelabels
