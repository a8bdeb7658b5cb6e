// Package desktop wires wsl-gpu-hook into Docker Desktop's engine with
// nothing but the docker CLI.
//
// # Model
//
// Docker Desktop's dockerd runs in its own WSL distro (docker-desktop), in
// a LinuxKit root that is read-only or reset at every start; only its data
// disk (/var/lib/docker: images, containers, volumes) persists. A user's
// own distro can reach that engine only through the docker CLI, so nothing
// can be installed into it as files: what the engine needs is given by a
// container the engine itself runs.
//
// Install runs the project's image as a restart-always container (the
// agent, `wsl-gpu-ctl cdi keep`) that
//
//   - copies wsl-gpu-hook and wsl-gpu-ctl into a named volume, which lives
//     on the data disk and so survives Docker Desktop's restarts: the path
//     the CDI specs name for their hooks (the volume's mount point in the
//     engine, [Engine.HookDir]) is one the engine's runc can always run;
//   - writes the CDI specs into a spec directory the engine reads (bound
//     from the engine's mount namespace, where `docker run -v` resolves its
//     sources), at every engine start, since the root and /var/run are
//     reset by each restart, and again whenever the adapters change.
//
// Before that, the same container runs once in the foreground (--once),
// so a host without /dev/dxg or without a GPU fails the install with the
// agent's own line instead of a container restarting forever.
//
// Uninstall removes the agent container, runs the image once with
// --remove (which takes away exactly the files the agent recorded writing)
// and removes the volume.
//
// # What it decides, and what it leaves to the caller
//
// [ParseInfo] and [Engine.Check] judge `docker info`: Docker Desktop or
// not, CDI on, which spec directory. [Engine.Install] and
// [Engine.Uninstall] are the docker commands as argument lists, printed by
// --dry-run and run by [Run] with the [Docker] function the caller gives
// (cmd/wsl-gpu-ctl: the docker CLI on PATH). Every refusal is an [Error]
// whose text is one line saying what is wrong and what to do.
//
// NVIDIA's --gpus stays Docker Desktop's own (its bundled toolkit's
// prestart hook); the specs add nvidia.com/gpu, amd.com/gpu and
// wsl-gpu-hook.dev/gpu, which Docker Desktop does not define. When both
// reach one container, the agent's hook finds the driver folder already
// mounted (same device and inode) and does not mount it again.
package desktop
