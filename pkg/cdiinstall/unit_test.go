package cdiinstall

import (
	"fmt"
	"strings"
)

// execStart reads back the argv of a unit's ExecStart line as systemd
// splits it, undoing quote: the tests' check that quote is reversible.
func execStart(unit string) ([]string, error) {
	for _, line := range strings.Split(unit, "\n") {
		rest, ok := strings.CutPrefix(line, "ExecStart=")
		if !ok {
			continue
		}
		var argv []string
		for rest = strings.TrimLeft(rest, " "); rest != ""; rest = strings.TrimLeft(rest, " ") {
			if rest[0] != '"' {
				word, tail, _ := strings.Cut(rest, " ")
				argv, rest = append(argv, strings.ReplaceAll(strings.ReplaceAll(word, "%%", "%"), "$$", "$")), tail
				continue
			}
			var b strings.Builder
			i := 1
			for ; i < len(rest) && rest[i] != '"'; i++ {
				switch {
				case rest[i] == '\\' && i+1 < len(rest):
					i++
					b.WriteByte(rest[i])
				case (rest[i] == '%' || rest[i] == '$') && i+1 < len(rest) && rest[i+1] == rest[i]:
					i++
					b.WriteByte(rest[i])
				default:
					b.WriteByte(rest[i])
				}
			}
			if i >= len(rest) {
				return nil, fmt.Errorf("unterminated quote in ExecStart: %s", line)
			}
			argv, rest = append(argv, b.String()), rest[i+1:]
		}
		return argv, nil
	}
	return nil, fmt.Errorf("the unit has no ExecStart line")
}
