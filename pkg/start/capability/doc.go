// Package capability decides which parts of a GPU's stack beyond compute a
// container asked for: graphics (Mesa's D3D12 GL and Vulkan drivers), video
// (VA-API on D3D12) and display (the WSLg sockets).
//
// Compute is always part of a request: it is what the hook gives every GPU
// container (the device, the lib dir, the driver folders). The others are
// added by name, from the project's own annotation or variable
// (wsl-gpu-hook/capabilities, WSL_GPU_CAPABILITIES) or from
// NVIDIA_DRIVER_CAPABILITIES as Docker's --gpus 'capabilities=...' and
// NVIDIA's images set it.
//
// "all" never includes display: display hands the container the user's
// desktop session (an X11 client can read every keystroke, PulseAudio
// carries the microphone), and images set NVIDIA_DRIVER_CAPABILITIES=all in
// their Dockerfile. Display must be named.
//
// The project's own syntax is strict (an unknown word is an error: a typo
// must not silently drop a capability); NVIDIA_DRIVER_CAPABILITIES is NVIDIA's
// namespace and may carry words this package does not serve (utility,
// compat32, ngx), which are reported and otherwise ignored.
package capability
