package printable

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Label is the bound for label values and table cells: adapter
// descriptions ("NVIDIA GeForce RTX 3060 Laptop GPU") fit whole, and so
// does a process name (15 bytes) with every byte escaped (4 bytes each),
// while a driver that answers 4096 characters does not make every
// series of the adapter that long.
const Label = 128

// Line is the bound for a whole message line (an error, a note).
const Line = 512

// ellipsis ends a string that was cut.
const ellipsis = "…"

// String returns s with bytes that are not UTF-8 replaced by U+FFFD and
// non-graphic characters escaped, cut to at most max bytes; a string
// that was cut ends in "…" (and max below its 3 bytes gives "").
func String(s string, max int) string {
	var b strings.Builder
	fit := 0 // b's length at the last piece that leaves room for "…"
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		i += n
		var piece string
		switch {
		case r == utf8.RuneError && n == 1:
			piece = "\ufffd"
		case r == ' ' || unicode.IsGraphic(r):
			piece = string(r)
		case r < 0x100:
			piece = fmt.Sprintf(`\x%02x`, r)
		case r <= 0xffff:
			piece = fmt.Sprintf(`\u%04x`, r)
		default:
			piece = fmt.Sprintf(`\U%08x`, r)
		}
		if b.Len()+len(piece) > max {
			if max < len(ellipsis) {
				return ""
			}
			return b.String()[:fit] + ellipsis
		}
		b.WriteString(piece)
		if b.Len() <= max-len(ellipsis) {
			fit = b.Len()
		}
	}
	return b.String()
}
