// Package cdiselect is what a CDI device of ours stands for: the selection
// (all, a vendor, a vendor's N-th adapter, an index, a LUID) each device
// gives its createContainer hook as the argument (and the container as its
// own variable), how the hook reads it back (FromArgs; FromEnv for specs
// written before the argument) and resolves it against the adapters
// present at that start: as request selectors (Selection.Selector), by
// the one matcher of requests and CDI devices, request.Select, so "the
// N-th AMD adapter" is counted the same way by the hook, the CDI specs and
// the device plugin (request.Targets).
//
// It is apart from pkg/setup/cdispec, which writes the specs, so that the hook,
// which runs on every container start, links neither the CDI module's
// spec cache nor its YAML parser.
package cdiselect
