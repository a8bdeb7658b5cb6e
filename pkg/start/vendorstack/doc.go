// Package vendorstack decides what a container needs beyond the driver store
// folders for each vendor's stack to run on WSL, and for the capabilities it
// asked for (package capability):
//
//   - AMD ROCm 7.1+ loads librocdxg, a /dev/dxg backend for the HSA runtime,
//     when HSA_ENABLE_DXG_DETECTION=1. librocdxg and its dids.conf come from
//     the WSL host's ROCm install (rocm_dir, /opt/rocm), not from the driver
//     store nor from ROCm images. The HSA runtime dlopens it by bare name
//     (librocdxg.so.1 since ROCm 7.2, librocdxg.so before), so it goes where
//     the loader finds it in any image: /usr/lib under both names (the place
//     AMD's README binds it to), plus a loader-cache entry for images whose
//     loader does not search /usr/lib. dids.conf goes to /usr/share/rocdxg,
//     next to it as in an install prefix.
//   - Intel Level Zero picks GPUs with ZE_AFFINITY_MASK, indexes among the
//     Intel GPUs (compute-only adapters such as the NPU belong to another
//     Level Zero driver and are not counted).
//   - Mesa's D3D12 drivers (graphics, video) pick an adapter with
//     MESA_D3D12_DEFAULT_ADAPTER_NAME, a substring of the adapter's
//     description; VA-API (video) also needs LIBVA_DRIVER_NAME=d3d12 and
//     WSL's /dev/dri nodes.
//   - Qualcomm's Adreno (Windows on Arm) has no compute stack of its own on
//     Linux: D3D12 (the lib dir's libd3d12, libd3d12core and libdxcore,
//     with the user-mode driver in its qcdx* driver store folder) and Mesa
//     on top of it (GL, dzn Vulkan) are the whole stack, steered like any
//     adapter by MESA_D3D12_DEFAULT_ADAPTER_NAME. The Hexagon NPU beside
//     it is compute-only: never Mesa's adapter.
//   - Display gives the WSLg sockets: X11 (/tmp/.X11-unix, DISPLAY), Wayland
//     (XDG_RUNTIME_DIR, WAYLAND_DISPLAY) and PulseAudio (PULSE_SERVER).
//
// Selection variables narrow what a program uses; they never isolate: every
// process that can open /dev/dxg sees every adapter. They are set only when
// a request narrows the choice (not for "all"), and only where their meaning
// is certain. CUDA_VISIBLE_DEVICES and ROCR_VISIBLE_DEVICES/HIP_VISIBLE_DEVICES
// are never set: CUDA orders devices fastest first and accepts UUIDs the
// WSL host does not report, and librocdxg skips adapters its dids table does
// not know, so neither index maps to an adapter index the hook can compute.
//
// Plan is pure, as is the whole package: it takes the selected adapters,
// the capabilities and what package stackprobe found on the host (a Host),
// and returns data in package edits' vocabulary, an edits.Stack (mounts,
// device nodes, variables with why each is set, loader-cache entries), and
// notes saying what was left out and why. PlanSelected keeps the selected
// adapters whose folders are usable, then plans: the hook and the runtime
// wrapper both start there. Needs says which probes a request needs, so
// the hook's hot path stats nothing it does not use. Missing reports host
// problems for doctor.
package vendorstack
