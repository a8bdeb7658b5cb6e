package cdiinstall

import (
	"fmt"
	"strings"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/config"
)

// Unit is the refresh unit for o: the shipped config/systemd file with the
// ExecStart o.GenerateArgs makes. A user unit (o.User) is started by the
// user's own manager: its target is the user's, it is ordered against no
// system service, and it has no sandbox, which a user manager sets up only
// in a user namespace of its own where ProtectHome= would hide the very
// spec dir it writes; it runs with the user's rights anyway.
func Unit(o Options) string {
	argv := append([]string{o.HookPath}, o.GenerateArgs()...)
	quoted := make([]string, len(argv))
	for i, a := range argv {
		quoted[i] = quote(a)
	}
	var out []string
	section := ""
	for _, line := range strings.Split(config.CDIRefreshUnit, "\n") {
		if strings.HasPrefix(line, "[") {
			section = line
		}
		switch {
		case strings.HasPrefix(line, "ExecStart="):
			line = "ExecStart=" + strings.Join(quoted, " ")
		case !o.User:
		case section != "" && strings.HasPrefix(line, "#"):
			continue // the comments say why of the lines dropped here
		case strings.HasPrefix(line, "Before="):
			continue
		case section == "[Service]" && line != "" && line != section && !strings.HasPrefix(line, "Type="):
			continue
		case strings.HasPrefix(line, "WantedBy="):
			line = "WantedBy=default.target"
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}

// quote writes one ExecStart word as systemd reads it back: plain when it
// has no space, quote, backslash, specifier (%), variable ($) or control
// character, else double-quoted with those escaped. A control character
// is a C escape (systemd.syntax(7)): a raw newline would end the
// ExecStart line, and what followed it in a path (a --config FILE) would
// be a directive of its own.
func quote(s string) string {
	plain := s != ""
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c == 0x7f || strings.IndexByte("\"'\\%$;", c) >= 0 {
			plain = false
			break
		}
	}
	if plain {
		return s
	}
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\' || c == '"':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c == '%' || c == '$':
			b.WriteByte(c)
			b.WriteByte(c)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\t':
			b.WriteString(`\t`)
		case c < ' ' || c == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}
