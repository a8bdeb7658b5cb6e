// Package wrapper is wsl-gpu-runtime: an OCI runtime that, on create or
// run of a container asking for the GPU, adds /dev/dxg and the hook to the
// bundle's config.json (edits.Edits.Patch, one decode and one encode) and
// then execs the real runtime with its arguments untouched.
//
// It is also, with CDI, the one path that can set the container's
// environment: the variables the selected vendor stacks and capabilities
// need (package vendorstack: HSA_ENABLE_DXG_DETECTION, ZE_AFFINITY_MASK,
// LIBVA_DRIVER_NAME, DISPLAY, ...) go into process.env unless the container
// sets them itself, and their device nodes into linux.devices. For that it
// enumerates the adapters as the hook does.
//
// Engines that pick a runtime per container (Docker --runtime, containerd
// runtime handlers, Kubernetes RuntimeClass) use it where no OCI hook can be
// configured. The runtime then makes the node and owns its device rule,
// which survives `runc update` and systemd reloads.
//
// Errors go where engines read a runtime's errors: stderr, and runc's --log
// file in its --log-format (containerd's shim and Docker show that one),
// which it opens as the hook opens its own log (hooklog.OpenFile): not
// through a link, and only a regular file of its user's that no one else
// may write.
package wrapper
