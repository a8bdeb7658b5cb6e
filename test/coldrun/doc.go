// Package coldrun measures a function the way a hook process meets it:
// once, in a fresh process. The OCI hook runs once per container start, so
// every page it touches is a first touch (about 30 us a fault on the
// nested VM this project is measured on) and every lazy setup runs; a warm
// benchmark loop hides both.
//
// A package's TestMain calls Main with its measured functions; a benchmark
// calls Bench, which re-executes the test binary once per variant per
// round, alternating variants so that all see the same machine, and
// reports each variant's medians as "<variant>-cold-us/op" and
// "<variant>-faults/op" (minor page faults inside the timed part).
//
// It is a test helper: only _test.go files import it.
package coldrun
