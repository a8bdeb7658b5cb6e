// Package nodesetup is what the device plugin's DaemonSet does to a node so
// the node needs nothing installed by hand beyond WSL: it copies the hook
// (and wsl-gpu-ctl beside it) from the image into a directory of the node
// and keeps the CDI specs in the node's CDI dir current (they name that
// hook copy). The node's paths are mounted into the container under Root;
// every path here is a node path under it.
//
// # What stays, and what goes
//
// Running GPU pods depend on what setup writes: a container that restarts
// needs its CDI spec and the hook it names. So a stop of the plugin pod
// (an upgrade, a restart, an eviction, an OOM kill) removes nothing; only
// the chart's uninstall calls [Setup.Remove] (package lifecycle decides
// which stop is which). Remove takes away exactly what setup recorded
// writing, by name, in the manifest it keeps in the hook dir
// (node-setup.json), and the directories it recorded creating when they
// are empty: never a file it did not write, such as another producer's
// spec or a DRA claim's (the DRA driver owns those).
//
// The manifest names a file before the file is written, so a setup killed
// half-way leaves nothing unrecorded; it only ever grows, so a file written
// under an older version's name or into a directory an upgrade no longer
// uses is still removed at the uninstall, where it is still mounted.
//
// A spec file is setup's only while its hooks run the hook copy (what `cdi
// generate --hook` writes for it): a file under one of its names that
// another installer wrote (the host package's `install cdi` writing into
// the same CDI dir) is not recorded, and stops the regeneration that
// would overwrite it; a recorded name whose file another installer wrote
// since is left by Remove. The hook dir is setup's alone: its files go by
// name.
package nodesetup
