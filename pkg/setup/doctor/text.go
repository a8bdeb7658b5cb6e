package doctor

import (
	"strings"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/shared/printable"
)

// shown is text a report holds, made safe to print: several errors joined
// by newlines become one line ("; "), and every character a terminal acts
// on (escapes, carriage returns, bidirectional overrides) is shown as a
// Go escape (package printable). What the checks print comes partly from
// others (engine errors, container labels and mounts, file names), and a
// fix line is what people paste as root.
func shown(s string) string {
	s = strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "; ")
	// No cut: a report line is as long as what it says.
	return printable.String(s, len(s)*len(`\U0010ffff`)+1)
}

// shellArg is s as one word of a shell command line: unchanged when it
// holds only characters no shell treats specially (every path WSL and the
// engines use), else single-quoted.
func shellArg(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./:=@%+,-") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
