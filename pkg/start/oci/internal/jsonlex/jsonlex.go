package jsonlex

import (
	"strconv"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxDepth bounds the nesting a Decoder walks (encoding/json's own limit
// is 10000): a deeper document fails, and its caller decodes it with
// encoding/json.
const MaxDepth = 1000

// Decoder walks a JSON document, checking it as it goes. Every method
// returns false on anything unexpected, and the walk then stops: the
// Decoder is then at an unspecified place and is not used again.
type Decoder struct {
	b     []byte
	i     int
	depth int
}

// NewDecoder returns a Decoder at the start of doc, which it does not copy.
func NewDecoder(doc []byte) Decoder {
	return Decoder{b: doc}
}

func (d *Decoder) ws() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// peek returns the first byte of the next token (0 at the end).
func (d *Decoder) peek() byte {
	d.ws()
	if d.i >= len(d.b) {
		return 0
	}
	return d.b[d.i]
}

// literal consumes lit if it comes next.
func (d *Decoder) literal(lit string) bool {
	d.ws()
	if len(d.b)-d.i < len(lit) || string(d.b[d.i:d.i+len(lit)]) != lit {
		return false
	}
	d.i += len(lit)
	return true
}

// Null consumes a null if one comes next.
func (d *Decoder) Null() bool {
	return d.peek() == 'n' && d.literal("null")
}

// rawString consumes a string and returns its bytes between the quotes,
// with esc set when they hold escapes. It checks what json.Valid checks:
// no control characters, only the escapes JSON defines.
func (d *Decoder) rawString() (raw []byte, esc, ok bool) {
	if d.peek() != '"' {
		return nil, false, false
	}
	d.i++
	start := d.i
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			raw = d.b[start:d.i]
			d.i++
			return raw, esc, true
		case c < 0x20:
			return nil, false, false
		case c == '\\':
			esc = true
			if d.i+1 >= len(d.b) {
				return nil, false, false
			}
			switch d.b[d.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				d.i += 2
			case 'u':
				if hex4(d.b[d.i+2:]) < 0 {
					return nil, false, false
				}
				d.i += 6
			default:
				return nil, false, false
			}
		default:
			d.i++
		}
	}
	return nil, false, false
}

// members walks the members of an object, calling member after each key
// and its colon; member consumes the value.
func (d *Decoder) members(member func(key []byte, esc bool) bool) bool {
	if d.peek() != '{' || d.depth >= MaxDepth {
		return false
	}
	d.i++
	d.depth++
	if d.peek() == '}' {
		d.i++
		d.depth--
		return true
	}
	for {
		key, esc, ok := d.rawString()
		if !ok || d.peek() != ':' {
			return false
		}
		d.i++
		if !member(key, esc) {
			return false
		}
		switch d.peek() {
		case ',':
			d.i++
		case '}':
			d.i++
			d.depth--
			return true
		default:
			return false
		}
	}
}

// Object walks an object, calling field with the index in names (at most
// 64) of each key that matches one as encoding/json matches struct fields (exactly or
// ASCII case-insensitively), and skipping other members. It fails on a
// key it cannot match as encoding/json would (escaped or non-ASCII), on a
// name given twice, and when field fails.
func (d *Decoder) Object(names []string, field func(int) bool) bool {
	var seen uint64
	return d.members(func(key []byte, esc bool) bool {
		if esc {
			return false
		}
		for _, c := range key {
			if c >= utf8.RuneSelf {
				return false // may fold to a field name (U+017F to s)
			}
		}
		idx := -1
		for i, n := range names {
			if equalFoldASCII(key, n) {
				idx = i
				break
			}
		}
		if idx < 0 {
			return d.Skip()
		}
		if seen&(1<<idx) != 0 {
			return false // encoding/json merges a repeated member
		}
		seen |= 1 << idx
		return field(idx)
	})
}

func equalFoldASCII(a []byte, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// Array walks an array, calling elem to consume each element.
func (d *Decoder) Array(elem func() bool) bool {
	if d.peek() != '[' || d.depth >= MaxDepth {
		return false
	}
	d.i++
	d.depth++
	if d.peek() == ']' {
		d.i++
		d.depth--
		return true
	}
	for {
		if !elem() {
			return false
		}
		switch d.peek() {
		case ',':
			d.i++
		case ']':
			d.i++
			d.depth--
			return true
		default:
			return false
		}
	}
}

// Skip consumes one value of any kind.
func (d *Decoder) Skip() bool {
	switch d.peek() {
	case '"':
		_, _, ok := d.rawString()
		return ok
	case '{':
		return d.members(func([]byte, bool) bool { return d.Skip() })
	case '[':
		return d.Array(d.Skip)
	case 't':
		return d.literal("true")
	case 'f':
		return d.literal("false")
	case 'n':
		return d.literal("null")
	}
	_, ok := d.number()
	return ok
}

// Str decodes a string or null (which leaves dst alone) into dst.
func (d *Decoder) Str(dst *string) bool {
	if d.Null() {
		return true
	}
	raw, esc, ok := d.rawString()
	if ok {
		*dst = unquote(raw, esc)
	}
	return ok
}

// Strs decodes an array of strings or null into dst, which is nil.
func (d *Decoder) Strs(dst *[]string) bool {
	if d.Null() {
		return true
	}
	*dst = []string{} // encoding/json makes [] an empty, non-nil slice
	return d.Array(func() bool {
		var s string
		*dst = append(*dst, s)
		return d.Str(&(*dst)[len(*dst)-1])
	})
}

// StringMap decodes an object of strings or null into dst, which is nil.
func (d *Decoder) StringMap(dst *map[string]string) bool {
	if d.Null() {
		return true
	}
	m := map[string]string{}
	*dst = m
	return d.members(func(key []byte, esc bool) bool {
		var v string // Null stores ""
		if !d.Str(&v) {
			return false
		}
		m[unquote(key, esc)] = v // the last of a repeated key wins, as in encoding/json
		return true
	})
}

// number consumes a number and returns its text; ok is false if what
// comes next is not a number by JSON's grammar:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?
func (d *Decoder) number() (string, bool) {
	d.ws()
	start := d.i
	digits := func() int {
		n := 0
		for d.i < len(d.b) && '0' <= d.b[d.i] && d.b[d.i] <= '9' {
			d.i++
			n++
		}
		return n
	}
	if d.i < len(d.b) && d.b[d.i] == '-' {
		d.i++
	}
	intStart := d.i
	if n := digits(); n == 0 || n > 1 && d.b[intStart] == '0' {
		return "", false
	}
	if d.i < len(d.b) && d.b[d.i] == '.' {
		d.i++
		if digits() == 0 {
			return "", false
		}
	}
	if d.i < len(d.b) && (d.b[d.i] == 'e' || d.b[d.i] == 'E') {
		d.i++
		if d.i < len(d.b) && (d.b[d.i] == '+' || d.b[d.i] == '-') {
			d.i++
		}
		if digits() == 0 {
			return "", false
		}
	}
	return string(d.b[start:d.i]), true
}

// Int64 decodes an integer or null into dst as encoding/json does into an
// int64: strconv.ParseInt of the number's text.
func (d *Decoder) Int64(dst *int64) bool {
	if d.Null() {
		return true
	}
	s, ok := d.number()
	if !ok {
		return false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return false
	}
	*dst = n
	return true
}

// Uint32 decodes an unsigned integer or null into dst, as encoding/json
// does: strconv.ParseUint, then a range check.
func (d *Decoder) Uint32(dst *uint32) bool {
	if d.Null() {
		return true
	}
	s, ok := d.number()
	if !ok {
		return false
	}
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return false
	}
	*dst = uint32(n)
	return true
}

func (d *Decoder) Bool(dst *bool) bool {
	switch {
	case d.Null():
		return true
	case d.literal("true"):
		*dst = true
		return true
	case d.literal("false"):
		*dst = false
		return true
	}
	return false
}

// End reports whether only white space is left.
func (d *Decoder) End() bool {
	d.ws()
	return d.i == len(d.b)
}

// unquote undoes the escapes of a string rawString accepted, as
// encoding/json does: a lone UTF-16 surrogate, and each byte of invalid
// UTF-8, becomes U+FFFD.
func unquote(raw []byte, esc bool) string {
	if !esc && utf8.Valid(raw) {
		return string(raw)
	}
	out := make([]byte, 0, len(raw)+2*utf8.UTFMax)
	for i := 0; i < len(raw); {
		c := raw[i]
		switch {
		case c == '\\':
			i++
			switch raw[i] {
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				r := hex4(raw[i+1:])
				i += 5
				if utf16.IsSurrogate(r) {
					if i+1 < len(raw) && raw[i] == '\\' && raw[i+1] == 'u' {
						if dec := utf16.DecodeRune(r, hex4(raw[i+2:])); dec != unicode.ReplacementChar {
							out = utf8.AppendRune(out, dec)
							i += 6
							continue
						}
					}
					r = unicode.ReplacementChar
				}
				out = utf8.AppendRune(out, r)
				continue
			default: // '"', '\\', '/'
				out = append(out, raw[i])
			}
			i++
		case c < utf8.RuneSelf:
			out = append(out, c)
			i++
		default:
			r, n := utf8.DecodeRune(raw[i:])
			if r == utf8.RuneError && n == 1 {
				out = utf8.AppendRune(out, unicode.ReplacementChar)
			} else {
				out = append(out, raw[i:i+n]...)
			}
			i += n
		}
	}
	return string(out)
}

// hex4 decodes 4 hex digits; -1 when b is shorter or not hex.
func hex4(b []byte) rune {
	if len(b) < 4 {
		return -1
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}
