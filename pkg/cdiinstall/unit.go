package cdiinstall

import (
	"fmt"
	"strings"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/config"
)

// Unit is the refresh unit for o: the shipped config/systemd file with the
// ExecStart o.GenerateArgs makes, and for a user unit the user's target.
func Unit(o Options) string {
	argv := append([]string{o.HookPath}, o.GenerateArgs()...)
	quoted := make([]string, len(argv))
	for i, a := range argv {
		quoted[i] = quote(a)
	}
	var out []string
	for _, line := range strings.Split(config.CDIRefreshUnit, "\n") {
		switch {
		case strings.HasPrefix(line, "ExecStart="):
			line = "ExecStart=" + strings.Join(quoted, " ")
		case o.User && strings.HasPrefix(line, "Before="):
			continue // system services: a user unit cannot order against them
		case o.User && strings.HasPrefix(line, "WantedBy="):
			line = "WantedBy=default.target"
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}

// quote writes one ExecStart word as systemd reads it back: plain when it
// has no space, quote, backslash, specifier (%) or variable ($), else
// double-quoted with those escaped.
func quote(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\"'\\%$;") {
		return s
	}
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, `%`, `%%`, `$`, `$$`)
	return `"` + r.Replace(s) + `"`
}

// ExecStart reads back the argv of a unit's ExecStart line, undoing quote.
func ExecStart(unit string) ([]string, error) {
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
