package printable

import (
	"crypto/sha256"
	"encoding/hex"
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

// tagLen is the length of Unique's tag: "~" and 16 hex digits.
const tagLen = 1 + 16

// Unique is String for a value that tells series (or rows) apart: a
// label value, where two series with the same labels make the whole
// scrape fail. String is not one-to-one: names alike in their first max
// bytes are cut to the same text, and so are names that differ only in
// bytes it replaces or escapes ("\xff" and "\xfe", ESC and the text
// `\x1b`). So when String would change s, or s holds a "~", Unique ends
// the text in "~" and 16 hex digits of s's SHA-256, within max. A result
// without "~" is the value itself, and one with it ends in the value's
// hash, so two different values give two different results (short of a
// SHA-256 collision on 64 bits), and the same value always the same one.
// Kubernetes and engine names never hold "~" and stay as they are. max
// below the tag's 17 bytes gives String(s, max).
func Unique(s string, max int) string {
	out := String(s, max)
	if out == s && !strings.Contains(s, "~") || max < tagLen {
		return out
	}
	sum := sha256.Sum256([]byte(s))
	return String(s, max-tagLen) + "~" + hex.EncodeToString(sum[:8])
}
