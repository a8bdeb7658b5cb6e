// Package cdiinstall plans `wsl-gpu-hook install cdi`: the CDI spec files
// and the unit that regenerates them at boot, both from one Options, so the
// unit's `cdi generate` writes exactly the bytes install wrote (same hook
// path, same --config, same kinds). Before it plans a write it loads the
// spec directories the way engines do (the CDI library's cache) with the
// planned files in place, and refuses to leave a device name two producers
// define: NVIDIA's toolkit writes nvidia.com/gpu too.
package cdiinstall
