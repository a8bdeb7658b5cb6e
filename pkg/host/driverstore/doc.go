// Package driverstore turns what the Windows host reports about its GPU
// adapters (package dxcore) into Linux paths: each adapter's vendor and its
// folder under WSL's mount of the Windows driver store, /usr/lib/wsl/drivers.
//
// The model: the host returns a Windows path per adapter
// (\SystemRoot\System32\DriverStore\FileRepository\nvltwi.inf_amd64_<hash>);
// FolderName maps it as libdxg does to a folder name; Build checks the folder
// is a real directory under the drivers dir, dedupes folders shared by
// several adapters and records, per adapter, why a folder is unusable.
// An adapter's vendor is its PCI vendor's, or NVIDIA when the host gives an
// id the table does not know and its folder holds libcuda.so.1.1;
// AdapterVendors is that one derivation, for readers that need no folders
// (the metrics), so every reader names an adapter alike.
//
// Invariants: a folder name is a clean relative path that stays inside the
// drivers dir, whatever the host says; a folder that is a symlink, or sits
// under one, is refused, never followed. Windows paths are case-insensitive,
// so a folder missing under its exact name is matched ignoring case.
// Failing adapters are data (Adapter.Err), not a failed Build: one stale
// folder after a Windows driver update must not cost the other GPUs.
//
// Build runs on every container start, so without Options.ListFiles it only
// stats: no directory listing unless a folder has to be matched ignoring
// case. ListFiles reads ELF headers of every file and is meant for reports.
//
// What it does not do: the result is names checked at one moment. Whoever
// mounts a folder must still open it safely (O_NOFOLLOW, inside the drivers
// dir), as package mounts does. No cgo, no exec.
package driverstore
