// Package cdiselect is what a CDI device of ours stands for: the selection
// (all, a vendor, a vendor's N-th adapter, an index, a LUID) each device
// puts in the container's environment as its own variable, and how the
// createContainer hook reads those variables back and resolves them
// against the adapters present at that start.
//
// It is apart from pkg/cdispec, which writes the specs, so that the hook,
// which runs on every container start, links neither the CDI module's
// spec cache nor its YAML parser.
package cdiselect
