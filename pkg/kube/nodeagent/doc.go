// Package nodeagent is the node agent's life, as wsl-gpu-device-plugin
// lives it on each node of the Helm chart: keep the node set up (the hook
// copy and CDI specs, package nodesetup) while the device plugin serves,
// label the node at each inventory (package nodelabels), and at the stop
// decide (package lifecycle) whether the stop is the chart's uninstall,
// which removes the setup and the labels, or a restart, which keeps
// everything.
//
// The command's main only parses its flags and wires the real setup,
// labeler and decision into an Agent; the order of the life (the setup
// loop ends before it is removed, the decision is asked once, after the
// plugin stopped, and only when there is something to undo) is held here,
// by tests with stand-ins.
package nodeagent
