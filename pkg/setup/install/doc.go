// Package install wires wsl-gpu-hook into container engines and takes it
// out again without breaking the operator's configuration.
//
// # Model
//
// Each engine function ([Docker], [Podman], [Containerd]) only reads: it
// returns a [Plan], a list of [Change] values (one file or link each, with
// its old and new content) and what the operator does next. Nothing is
// written until [Apply] carries the plan out, so a dry run is a plan that
// is printed ([Diff]) instead of applied. Every problem is found while
// planning: a malformed file, a name that belongs to someone else, or a
// table defined twice refuses the whole engine and nothing is changed.
//
// # What it owns, per file
//
//   - BinDir/nvidia-container-runtime-hook and BinDir/wsl-gpu-runtime:
//     symlinks to the hook binary, made only where the name is free and
//     removed only while they still point at the hook binary.
//     A nvidia-container-runtime-hook anywhere on dockerd's default PATH
//     that is not ours stops the Docker install: it is NVIDIA's toolkit's.
//   - /etc/docker/daemon.json: the member "wsl-gpu" of "runtimes" (and
//     "runtimes" itself when the file had none). It is inserted and removed
//     as text, laid out like its neighbours, so every other byte of the
//     file stays as it was and install followed by uninstall gives the
//     original bytes back. default-runtime is never set. A file install
//     created is left as "{}" by uninstall. Uninstall removes the member
//     only while its path is BinDir's wrapper: another wsl-gpu-hook's (the
//     package's beside a tarball's) stays, with a warning.
//   - /usr/share/containers/oci/hooks.d/wsl-gpu-hook.json: the whole file.
//   - /etc/containerd/config.toml: one block between a "# BEGIN
//     wsl-gpu-hook" and a "# END wsl-gpu-hook" line, appended at the end,
//     that adds the "wsl-gpu" runtime to the CRI plugin named as the
//     file's version key says (1 and 2: containerd 1.x, 3: containerd
//     2.x; an empty or missing file gets version = 2 inside the block).
//     The rest of the file (keys, comments, formatting) is only checked,
//     never re-encoded. A file install created is removed by uninstall.
//     Uninstall leaves a block whose handler runs another wsl-gpu-hook's
//     wrapper, with a warning.
//
// It never touches anything else: no other daemon.json key, no other
// runtime, no other hooks.d file, no containerd table outside the block,
// no service unit, and it restarts no daemon. What may keep a change from
// working without being wrong (BinDir off dockerd's default PATH, a
// containerd file with imports, an /etc/containers/oci/hooks.d file
// masking ours) is a Plan warning; a PATH set in docker.service is not
// read.
//
// # Reading
//
// [DockerState], [PodmanState] and [ContainerdState] read the same files,
// with the same lookups, and say what is wired today without changing
// anything. doctor judges an installation through them, so the paths,
// names and config parsing of each engine live here once.
//
// CDI is not here: package cdiinstall builds its own Plan (the specs and
// the systemd unit that keeps them current) and `wsl-gpu-ctl install
// cdi` carries it out with Apply and Diff.
//
// # Writing
//
// [Apply] writes each file atomically (a temporary file in the same
// directory renamed over it, with the original mode and owner), keeps the
// previous content as <file>.wsl-gpu-hook.bak, creates missing parent
// directories, and refuses a file that changed since it was planned. If a
// step fails, the steps already done are undone. A second install plans no
// changes at all.
//
// Paths in a plan are system paths; [Options.Prefix] is prepended when
// reading and writing, so tests and packagers work in a scratch tree.
package install
