// Package cli holds the conventions the project's four commands share,
// so that they behave alike:
//
//   - help (-h, --help, `help COMMAND`) is printed on stdout, exit 0
//     (Help);
//   - a command line that cannot run is one line on stderr that says what
//     is wrong and which help to read, exit 2, no usage dump (UsageError);
//   - a failure is one line, exit 1: runtimes embed a hook's stderr in
//     their own one-line error (Report, OneLine).
//
// Commands built on package flag parse with ParseFlags and describe
// themselves with a Doc; the hook's [--config FILE] COMMAND line is read by
// Parse, without flag.
//
// The hook links this package on every container start, so it imports
// nothing but errors, fmt, io and strings, and does no work at
// initialisation: ParseFlags takes the part of *flag.FlagSet it uses as an
// interface (cmd/wsl-gpu-hook/deps_test.go keeps flag out of the hook).
package cli
