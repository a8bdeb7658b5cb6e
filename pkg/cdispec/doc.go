// Package cdispec writes Container Device Interface specs for the WSL GPU,
// so podman, Docker 25+, containerd 1.7+ and CRI-O inject it by name:
// `--device nvidia.com/gpu=all`, podman 5's and Docker 29's `--gpus`,
// `--device amd.com/gpu=0`, and our own `--device wsl-gpu-hook.dev/gpu=intel`.
//
// A spec names nothing a Windows driver update changes. Its top-level edits
// are /dev/dxg, the lib dir and a createContainer hook that is
// wsl-gpu-hook itself; each device adds one environment variable saying
// what it stands for (a Selection: all, a vendor, a vendor's N-th adapter,
// an adapter index, a LUID). At every container start the hook reads those
// variables from the container's config, enumerates the host and mounts the
// selected adapters' current driver store folders. NVIDIA's own WSL spec
// names the folder (whose hash changes with each driver) and its files, and
// goes stale on every driver update; this one changes only when the set of
// adapters does.
package cdispec
