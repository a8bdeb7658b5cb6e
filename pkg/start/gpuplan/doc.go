// Package gpuplan decides what giving a container the WSL GPU takes: from
// what the container asked for and what the host offers, the whole plan,
// as data, before anything is changed.
//
// It does no I/O. A caller reads the container ([FromSpec]) and the host
// (package gpuhost, as a probed.Host), asks [Decide], logs [Plan.String]
// and carries out the plan: the device-cgroup step ([Plan.Cgroup]), the mount-namespace entry
// ([Plan.EnterMountNS]) and the steps for mounts.Apply. The plan that is
// logged is the plan that is applied. What the container gets is also one
// value, [Plan.Edits] (package edits); the wrapper, the CDI specs and the
// device plugin build theirs with the same package and render them in
// their own forms, and edits' TestOneView shows the container sees the
// same on every path.
//
// The rules, each tested in decide_test.go:
//
//   - No request, or a request of "none"/"void": nothing (Skip).
//   - The spec already lists /dev/dxg in linux.devices and mounts the lib
//     dir: an engine injected a CDI device, which chose the GPUs; a second
//     injector (the hooks.d or Docker --gpus hook, which the annotation or
//     NVIDIA_VISIBLE_DEVICES starts whatever the CDI spec's environment
//     says) leaves the container alone (Skip). This, not the CDI spec's
//     WSL_GPU_DEVICES=void, is what stops double injection.
//   - prestart and createRuntime hooks need the container's pid, enter its
//     mount namespace and allow the node in its device cgroup; a
//     createContainer hook runs in the container's cgroup and mount
//     namespace already and allows the node in its own cgroup, before it
//     can even open the node to enumerate ([Container.Cgroup]).
//   - A hook in a user namespace (a rootless engine's) leaves device
//     cgroups alone and binds the host's node instead of making one; so does
//     a container with a user namespace of its own, whose /dev cannot hold
//     a usable node. If the runtime made the node in such a container (CDI,
//     the wsl-gpu-runtime wrapper), the hook adds no device step at all.
//   - Adapters are selected by package request (NVIDIA_VISIBLE_DEVICES counts
//     NVIDIA adapters only). A request for exactly one adapter whose driver
//     folder is unusable fails with that adapter's error; a wider request
//     goes on without it (a warning) unless no selected adapter has a
//     folder, which fails: a container started so would only look as if it
//     had a GPU.
//   - A folder is mounted under the name the host's registry spells it
//     with, which a driver in the container builds its path from, on a
//     case-sensitive mount; where that differs from the name on disk (in
//     case), the disk name becomes a link to it.
//   - nvidia-smi is linked when an NVIDIA adapter is selected: from the lib
//     dir where current drivers put it, else from the first selected
//     folder holding one (older drivers).
//   - Each selected adapter's stack and each capability asked for adds what
//     package vendorstack decides (librocdxg for AMD, /dev/dri for video,
//     WSLg's sockets for display): its binds and nodes become steps, its
//     nodes join the cgroup step, its loader-cache entries join the lib
//     dir's. Its variables are in [Plan.Stack]: a hook cannot set them, so
//     the caller logs them. A CDI hook gets only the cache entries: the
//     engine applied the devices' own edits.
//
// # Calling it from a CDI hook
//
// Package hookrun's CDI entry does this. A createContainer hook that a CDI
// spec runs, after the engine made the
// node and the lib dir mount, builds a [request.Selection] from the CDI
// device's selection (its argument, pkg/start/cdiselect) and sets
// [Container.Injected]. It has no config.json to read (inside the
// container's own user namespace it could not), so the spec is empty:
//
//	c := gpuplan.FromSpec(&oci.Spec{}, gpuplan.CreateContainer, state.Pid, req)
//	c.Rootless, c.Injected = userns.RunningInUserNS(), true
//	host, err := gpuhost.Probe(opts)
//	plan, err := gpuplan.Decide(c, host)
//	// plan.Steps bind the selected folders, write the loader files and
//	// link nvidia-smi; the caller drops binds already in place.
package gpuplan
