// Package doctor checks a WSL2 machine for everything that decides whether
// a container gets the GPU, and says for each problem what to type.
//
// # Model
//
// [Run] performs every check and returns a [Report]: one [Result] per
// check, each with a status (ok, warn, fail), what was found, and the fix
// as a command when one exists. A warning is something that works but may
// surprise (an old kernel that hides compute-only adapters, an engine not
// wired to the hook); a failure is something a container will meet (no
// device, a driver folder gone, a CDI spec that mounts files that no
// longer exist). The checks, in order:
//
//   - the device /dev/dxg: present, a character device, mode o+rw (a
//     container's user is rarely host root), openable by this process;
//   - the kernel: whether it answers ENUMADAPTERS3 (package dxcore falls
//     back to ENUMADAPTERS2, which never lists compute-only adapters);
//   - each adapter: queried, its driver store folder present, a directory
//     everyone may read, and spelled on disk as the registry spells it;
//   - the lib dir: present, readable by everyone, libdxcore, libd3d12 and,
//     with an NVIDIA adapter, libcuda and nvidia-smi;
//   - Docker, podman and containerd: whether each is wired to the hook
//     (runtime entry, hooks.d file, handler), what would take precedence,
//     whether CDI is on, and whether the daemon was restarted after its
//     configuration changed;
//   - every CDI spec in the CDI dirs, ours and others': load errors,
//     conflicts (through the CDI module's own cache, as engines load them)
//     and stale specs, whose device nodes, mounts or hooks name host paths
//     that no longer exist;
//   - Docker Desktop's engine (when `docker info` names it): CDI on, and
//     the agent container install docker-desktop runs;
//   - Rancher Desktop: in its distro (its os-release), whether the
//     provisioning script is installed, our CDI specs are there and the
//     hook they name exists; from another distro (`docker info` names
//     its moby), whether the engine lists our CDI devices;
//   - the hook's log file: writable, and recent errors in it.
//
// [RunNodes] (`wsl-gpu-ctl doctor --k8s`) checks instead the Kubernetes
// nodes that run as containers on this host: kind, minikube and k3d
// nodes, found through the docker and podman CLIs by their tools' labels
// (an engine not installed or not running is skipped; podman's are the
// calling user's containers). A label proves nothing by itself (an image
// may carry any): a container is a node only when the labels were set on
// the container (not among its image's labels), the cluster name is one
// the tool makes, and the container's name is the one the tool gives that
// node; any other container with a tool's label is reported and left
// alone. For each node, running or stopped:
//
//   - /dev/dxg: privileged, passed as a device, or --gpus (the hook
//     serves it);
//   - /usr/lib/wsl: mounted read-only (kind's extraMounts), or, for a
//     node started with --gpus, brought by the hook at start, which
//     inspect cannot show: in a running node the files are looked for;
//   - the chart: its hook copy and CDI spec at the chart's default
//     hookDir and cdiDir (a running node only).
//
// # Paths
//
// Nothing is read at a fixed path: [Options] carries the GPU paths (from
// the hook's configuration), a root prefix for engine configuration,
// binaries and CDI dirs, the proc dir, and a prefix for the host paths CDI
// specs name. Tests run every check unprivileged against temporary trees,
// with the enumeration, the engines' version commands and the engine CLIs
// of the node checks injected.
//
// # What it never does
//
// It changes nothing: no file is written, no container is started. [Run]
// asks no daemon anything beyond `--version`, `docker info` and the
// inspection of Docker Desktop's agent container; [RunNodes] asks the engines
// to list and inspect containers and images and runs `ls` in running
// proven nodes (a constant script; the paths are its arguments, the
// container's hex ID the only other word). What it prints is partly
// others' words (engine errors, labels, file names): every field of a
// [Result] is made printable (package printable: terminal escapes shown,
// never sent), every name in a fix command has been checked against its
// tool's name grammar, and paths in fix commands are shell-quoted when
// they need it. It
// reports what it sees at one moment; the hook re-checks everything on
// every container start.
package doctor
