// Package nodesetup is what the device plugin's DaemonSet does to a node so
// the node needs nothing installed by hand beyond WSL: it copies the hook
// (and wsl-gpu-ctl beside it) from the image into a directory of the node,
// keeps the CDI specs in the node's CDI dir current (they name that hook
// copy), and removes all of it, and the directories it created, when the
// plugin stops for good. The node's root is mounted into the container at
// Root; every path here is a node path under it.
package nodesetup
