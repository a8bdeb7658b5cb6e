// Package cdiinstall plans `wsl-gpu-hook install cdi`: the CDI spec files
// and the unit that regenerates them at boot, both from one Options, so the
// unit's `cdi generate` (Sync) writes exactly the bytes install wrote (same
// hook path, same --config, same kinds).
//
// Before either writes anything, one check (resolve) loads the spec
// directories the way engines do (the CDI library's cache) with the
// planned files in place, and refuses to leave a device name two producers
// define: NVIDIA's toolkit writes nvidia.com/gpu too, and engines refuse a
// name two specs in one directory define. Install lets the user choose
// (move the other file aside, or skip the kind); `cdi generate` only
// reports it and writes nothing.
//
// SpecNames lists every file name the project has written in a CDI
// directory; the .deb's maintainer scripts are held to it (test/packages).
package cdiinstall
