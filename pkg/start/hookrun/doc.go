// Package hookrun is one run of wsl-gpu-hook as an OCI hook: two entries
// and one tail.
//
// The entries read what their caller hands the hook into a [Job]:
//
//   - [OCI], for a prestart, createRuntime or createContainer hook
//     (hooks.d, Docker's --gpus, the runtime wrapper's): the state on stdin
//     and the bundle's config.json, whose environment or annotation is the
//     request;
//   - [CDI], for the createContainer hook each CDI device of ours carries:
//     the state, the device's selections (its arguments) and the working
//     directory (or crun's state root), taken for the container's root
//     filesystem only once package hookroot proved it is, and held open
//     as a descriptor the steps go through. It never reads config.json,
//     which a container's own user namespace may not read (but for specs
//     written before selections were arguments).
//
// The tail, [Job.Run], is the same for both: probe the host, resolve the
// request against its adapters, decide (package gpuplan), log the plan,
// allow the nodes in the device cgroup, apply the steps (package mounts).
// What differs between the callers is data the entry put in the Job (the
// container as gpuplan sees it, whether the probe reads adapter details,
// how the request resolves), never a branch on the caller in the tail.
//
// The entries and a job that has nothing to do run unprivileged and are
// unit-tested so; the rest of the tail needs a WSL host and root, and is
// covered by the e2e tests.
package hookrun
