// Package cli holds the conventions the project's commands share: how a
// usage error differs from a failure, and the one line a failure is
// reported in.
package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"
)

// UsageError is a command line that cannot be run: the usage text follows
// it and the exit status is 2.
type UsageError struct{ Msg string }

func (u UsageError) Error() string { return u.Msg }

// Usagef makes a UsageError.
func Usagef(format string, a ...any) error { return UsageError{fmt.Sprintf(format, a...)} }

// Report prints err for a command named name and returns the exit status:
// 0 for nil, 2 with the usage text for a UsageError, 1 with one line
// otherwise (runtimes embed a hook's stderr in their own one-line error).
func Report(w io.Writer, name string, err error, usage string) int {
	if err == nil {
		return 0
	}
	var uerr UsageError
	if errors.As(err, &uerr) {
		fmt.Fprintf(w, "%s: %v\n\n%s", name, err, usage)
		return 2
	}
	fmt.Fprintf(w, "%s: %s\n", name, OneLine(err.Error()))
	return 1
}

// OneLine folds a multi-line error (errors.Join) into the single line a
// runtime shows.
func OneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", "; ")), " ")
}
