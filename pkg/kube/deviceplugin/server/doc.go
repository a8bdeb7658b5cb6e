// Package server runs the kubelet device plugin: one gRPC server per
// advertised resource on a unix socket in the kubelet's device-plugins dir,
// registered with the kubelet, serving ListAndWatch and Allocate from the
// plans package deviceplugin computes.
//
// A Manager re-lists the adapters on an interval and whenever the drivers
// dir changes (inotify, through fsnotify), pushes health changes to every
// ListAndWatch stream, writes the node-feature-discovery feature file, and
// registers again whenever the kubelet recreates its socket (a kubelet
// restart wipes the plugin sockets too). A host without /dev/dxg is not an
// error: the plan is empty, the reason is logged once per change, and the
// manager keeps looking, so the DaemonSet's pod never crash-loops.
//
// Held resources (Config.Hold: the chart's names with dra.enabled) are
// registered with no device whatever the plan says, so the kubelet keeps
// their endpoints: it forgets a resource 5 minutes after its last plugin
// went, then refuses to start the containers of pods that hold it.
package server
