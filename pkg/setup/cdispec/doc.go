// Package cdispec writes Container Device Interface specs for the WSL GPU,
// so podman, Docker 25+, containerd 1.7+ and CRI-O inject it by name:
// `--device nvidia.com/gpu=all`, podman 5's and Docker 29's `--gpus`,
// `--device amd.com/gpu=0`, and our own `--device wsl-gpu-hook.dev/gpu=intel`.
//
// Vendor kinds exist only where an engine turns --gpus into them (NVIDIA,
// AMD). Every other vendor's adapters are devices of our own kind, named by
// vendor: wsl-gpu-hook.dev/gpu=intel, and on Windows on Arm
// wsl-gpu-hook.dev/gpu=qualcomm (the Adreno GPU and the Hexagon NPU; =0 for
// the GPU alone). A qualcomm.com/gpu kind would claim a namespace that is
// Qualcomm's to define, and no engine would ever ask for it.
//
// A spec names nothing a Windows driver update changes. Its top-level edits
// are /dev/dxg and the lib dir; each device adds a createContainer hook
// that is wsl-gpu-hook itself, whose argument is what the device stands
// for (a Selection: all, a vendor, a vendor's N-th adapter, an adapter
// index, a LUID), and an environment variable saying the same for the
// container. At every container start the hook enumerates the host and
// mounts the selected adapters' current driver store folders, reading
// nothing of the container's config, which a hook in the container's own
// user namespace could not read. NVIDIA's own WSL spec
// names the folder (whose hash changes with each driver) and its files, and
// goes stale on every driver update; this one changes only when the set of
// adapters does.
package cdispec
