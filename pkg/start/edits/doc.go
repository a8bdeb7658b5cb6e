// Package edits is what a GPU container gets, as one value, and the forms
// that value takes on each path into a container.
//
// An [Edits] is made from a decided plan ([For], called by package gpuplan
// and by the device plugin): the /dev/dxg node and its device rule, further
// nodes (/dev/dri), the read-only binds (the lib dir, the selected driver
// folders under the name the container looks them up by, the vendor
// stacks' files), the files to write in the container (the loader
// configuration, loader-cache entries), the links to make (a folder's
// on-disk spelling, nvidia-smi), the variables to set and the hooks to run.
// What the vendor stacks add is a [Stack] in the same vocabulary (package
// vendorstack returns one), added by [Edits.AddStack].
//
// Each path renders the same value in the form it can carry:
//
//   - [Edits.Steps]: the hook's steps, applied by package mounts in the
//     container's root filesystem;
//   - [Edits.Patch]: the runtime wrapper's edit of config.json, in one
//     decode and one encode;
//   - [Edits.CDI]: a CDI spec's or device's containerEdits;
//   - [Edits.Allocation]: the device plugin's ContainerAllocateResponse,
//     without the kubelet's types.
//
// A form that cannot carry a part leaves it to a hook the value names:
// config.json and CDI have no way to write a file into the image, so the
// wrapper's and the CDI devices' values run the hook, which renders the
// rest as steps; a hook cannot set the container's environment, so it logs
// the variables. The property test (view_test.go) composes each form with
// what its hook then does and checks that the container sees the same
// thing on every path.
//
// It does no I/O but for what [Edits.Patch] is given, and links nothing the
// hook binary must not.
package edits
