package cdiinstall

import (
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
