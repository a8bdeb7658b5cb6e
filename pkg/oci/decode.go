package oci

import (
	"encoding/json"
	"os"
	"strconv"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// The fast decoder below reads the state and config.json without
// encoding/json: in a fresh process (a hook runs once per container start)
// json.Unmarshal's first call builds its per-type decoders and touches much
// code, and even json.Valid's first call costs ~0.1 ms on a test VM, while
// the document itself takes microseconds.
//
// It is equivalent to json.Unmarshal into the same types, but only decides
// what it is sure encoding/json decides the same way: it accepts a subset
// of valid JSON (it checks the grammar as it walks, and gives up on
// nesting deeper than maxDepth), and gives up on whatever it is unsure
// encoding/json maps the same way (a key with an escape or a non-ASCII
// letter, a key given twice, a value of the wrong JSON type, a number that
// does not fit). Giving up returns ok=false, and the caller then decodes
// with encoding/json, which gives its usual result or error. So results
// and errors are encoding/json's by construction; a differential fuzz
// test holds the fast path to that.

// maxDepth bounds the nesting the fast decoder walks (encoding/json's own
// limit is 10000); a deeper document goes to encoding/json.
const maxDepth = 1000

// fastDecoder walks a JSON document, checking it as it goes. Every method
// returns false on anything unexpected, and the walk then stops.
type fastDecoder struct {
	b     []byte
	i     int
	depth int
}

func (d *fastDecoder) ws() {
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
func (d *fastDecoder) peek() byte {
	d.ws()
	if d.i >= len(d.b) {
		return 0
	}
	return d.b[d.i]
}

// literal consumes lit if it comes next.
func (d *fastDecoder) literal(lit string) bool {
	d.ws()
	if len(d.b)-d.i < len(lit) || string(d.b[d.i:d.i+len(lit)]) != lit {
		return false
	}
	d.i += len(lit)
	return true
}

// null consumes a null if one comes next.
func (d *fastDecoder) null() bool {
	return d.peek() == 'n' && d.literal("null")
}

// rawString consumes a string and returns its bytes between the quotes,
// with esc set when they hold escapes. It checks what json.Valid checks:
// no control characters, only the escapes JSON defines.
func (d *fastDecoder) rawString() (raw []byte, esc, ok bool) {
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
func (d *fastDecoder) members(member func(key []byte, esc bool) bool) bool {
	if d.peek() != '{' || d.depth >= maxDepth {
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

// object walks an object, calling field with the index in names of each
// key that matches one as encoding/json matches struct fields (exactly or
// ASCII case-insensitively), and skipping other members. It fails on a
// key it cannot match as encoding/json would (escaped or non-ASCII), on a
// name given twice, and when field fails.
func (d *fastDecoder) object(names []string, field func(int) bool) bool {
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
			return d.skip()
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

// array walks an array, calling elem to consume each element.
func (d *fastDecoder) array(elem func() bool) bool {
	if d.peek() != '[' || d.depth >= maxDepth {
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

// skip consumes one value of any kind.
func (d *fastDecoder) skip() bool {
	switch d.peek() {
	case '"':
		_, _, ok := d.rawString()
		return ok
	case '{':
		return d.members(func([]byte, bool) bool { return d.skip() })
	case '[':
		return d.array(d.skip)
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

// str decodes a string or null (which leaves dst alone) into dst.
func (d *fastDecoder) str(dst *string) bool {
	if d.null() {
		return true
	}
	raw, esc, ok := d.rawString()
	if ok {
		*dst = unquote(raw, esc)
	}
	return ok
}

// strs decodes an array of strings or null into dst, which is nil.
func (d *fastDecoder) strs(dst *[]string) bool {
	if d.null() {
		return true
	}
	*dst = []string{} // encoding/json makes [] an empty, non-nil slice
	return d.array(func() bool {
		var s string
		*dst = append(*dst, s)
		return d.str(&(*dst)[len(*dst)-1])
	})
}

// stringMap decodes an object of strings or null into dst, which is nil.
func (d *fastDecoder) stringMap(dst *map[string]string) bool {
	if d.null() {
		return true
	}
	m := map[string]string{}
	*dst = m
	return d.members(func(key []byte, esc bool) bool {
		var v string // null stores ""
		if !d.str(&v) {
			return false
		}
		m[unquote(key, esc)] = v // the last of a repeated key wins, as in encoding/json
		return true
	})
}

// number consumes a number and returns its text; ok is false if what
// comes next is not a number by JSON's grammar:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?
func (d *fastDecoder) number() (string, bool) {
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

// int64 decodes an integer or null into dst as encoding/json does into an
// int64: strconv.ParseInt of the number's text.
func (d *fastDecoder) int64(dst *int64) bool {
	if d.null() {
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

// uint32 decodes an unsigned integer or null into dst, as encoding/json
// does: strconv.ParseUint, then a range check.
func (d *fastDecoder) uint32(dst *uint32) bool {
	if d.null() {
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

func (d *fastDecoder) bool(dst *bool) bool {
	switch {
	case d.null():
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

// end reports whether only white space is left.
func (d *fastDecoder) end() bool {
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

// decodeState is json.Unmarshal of a state, fast when it can be.
func decodeState(data []byte) (State, error) {
	if st, ok := fastState(data); ok {
		return st, nil
	}
	var st State
	err := json.Unmarshal(data, &st)
	return st, err
}

// decodeSpec is json.Unmarshal of a config.json, fast when it can be.
func decodeSpec(data []byte) (*Spec, error) {
	if s, ok := fastSpec(data); ok {
		return &s, nil
	}
	var s Spec
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// fastState decodes a state, or reports ok=false.
func fastState(data []byte) (st State, ok bool) {
	d := fastDecoder{b: data}
	if d.null() {
		return st, d.end()
	}
	ok = d.object([]string{"ociVersion", "id", "status", "pid", "bundle", "annotations", "root"}, func(i int) bool {
		switch i {
		case 0:
			return d.str(&st.Version)
		case 1:
			return d.str(&st.ID)
		case 2:
			s := string(st.Status)
			ok := d.str(&s)
			st.Status = specs.ContainerState(s)
			return ok
		case 3:
			var n int64
			if !d.int64(&n) {
				return false
			}
			st.Pid = int(n)
			return true
		case 4:
			return d.str(&st.Bundle)
		case 5:
			return d.stringMap(&st.Annotations)
		default:
			return d.str(&st.Root)
		}
	})
	return st, ok && d.end()
}

// fastSpec decodes a config.json, or reports ok=false.
func fastSpec(data []byte) (s Spec, ok bool) {
	d := fastDecoder{b: data}
	if d.null() {
		return s, d.end()
	}
	ok = d.object([]string{"root", "process", "annotations", "linux", "mounts"}, func(i int) bool {
		switch i {
		case 0:
			if d.null() {
				return true
			}
			s.Root = &specs.Root{}
			return d.object([]string{"path", "readonly"}, func(i int) bool {
				if i == 0 {
					return d.str(&s.Root.Path)
				}
				return d.bool(&s.Root.Readonly)
			})
		case 1:
			if d.null() {
				return true
			}
			s.Process = &Process{}
			return d.object([]string{"env"}, func(int) bool { return d.strs(&s.Process.Env) })
		case 2:
			return d.stringMap(&s.Annotations)
		case 3:
			if d.null() {
				return true
			}
			s.Linux = &Linux{}
			return d.linux(s.Linux)
		default:
			if d.null() {
				return true
			}
			s.Mounts = []specs.Mount{}
			return d.array(func() bool {
				s.Mounts = append(s.Mounts, specs.Mount{})
				return d.mount(&s.Mounts[len(s.Mounts)-1])
			})
		}
	})
	return s, ok && d.end()
}

func (d *fastDecoder) linux(l *Linux) bool {
	return d.object([]string{"resources", "devices", "namespaces"}, func(i int) bool {
		if d.null() {
			return true
		}
		switch i {
		case 0:
			l.Resources = &Resources{}
			return d.object([]string{"devices"}, func(int) bool {
				if d.null() {
					return true
				}
				l.Resources.Devices = []specs.LinuxDeviceCgroup{}
				return d.array(func() bool {
					l.Resources.Devices = append(l.Resources.Devices, specs.LinuxDeviceCgroup{})
					return d.deviceRule(&l.Resources.Devices[len(l.Resources.Devices)-1])
				})
			})
		case 1:
			l.Devices = []specs.LinuxDevice{}
			return d.array(func() bool {
				l.Devices = append(l.Devices, specs.LinuxDevice{})
				return d.device(&l.Devices[len(l.Devices)-1])
			})
		default:
			l.Namespaces = []specs.LinuxNamespace{}
			return d.array(func() bool {
				l.Namespaces = append(l.Namespaces, specs.LinuxNamespace{})
				ns := &l.Namespaces[len(l.Namespaces)-1]
				if d.null() {
					return true
				}
				return d.object([]string{"type", "path"}, func(i int) bool {
					if i == 1 {
						return d.str(&ns.Path)
					}
					t := string(ns.Type)
					ok := d.str(&t)
					ns.Type = specs.LinuxNamespaceType(t)
					return ok
				})
			})
		}
	})
}

func (d *fastDecoder) deviceRule(r *specs.LinuxDeviceCgroup) bool {
	if d.null() {
		return true
	}
	return d.object([]string{"allow", "type", "major", "minor", "access"}, func(i int) bool {
		switch i {
		case 0:
			return d.bool(&r.Allow)
		case 1:
			return d.str(&r.Type)
		case 2, 3:
			if d.null() {
				return true
			}
			n := new(int64)
			if i == 2 {
				r.Major = n
			} else {
				r.Minor = n
			}
			return d.int64(n)
		default:
			return d.str(&r.Access)
		}
	})
}

func (d *fastDecoder) device(dev *specs.LinuxDevice) bool {
	if d.null() {
		return true
	}
	return d.object([]string{"path", "type", "major", "minor", "fileMode", "uid", "gid"}, func(i int) bool {
		switch i {
		case 0:
			return d.str(&dev.Path)
		case 1:
			return d.str(&dev.Type)
		case 2:
			return d.int64(&dev.Major)
		case 3:
			return d.int64(&dev.Minor)
		}
		if d.null() {
			return true
		}
		n := new(uint32)
		switch i {
		case 4:
			if !d.uint32(n) {
				return false
			}
			m := os.FileMode(*n)
			dev.FileMode = &m
			return true
		case 5:
			dev.UID = n
		default:
			dev.GID = n
		}
		return d.uint32(n)
	})
}

func (d *fastDecoder) mount(m *specs.Mount) bool {
	if d.null() {
		return true
	}
	return d.object([]string{"destination", "type", "source", "options", "uidMappings", "gidMappings"}, func(i int) bool {
		switch i {
		case 0:
			return d.str(&m.Destination)
		case 1:
			return d.str(&m.Type)
		case 2:
			return d.str(&m.Source)
		case 3:
			return d.strs(&m.Options)
		}
		if d.null() {
			return true
		}
		maps := &m.UIDMappings
		if i == 5 {
			maps = &m.GIDMappings
		}
		*maps = []specs.LinuxIDMapping{}
		return d.array(func() bool {
			*maps = append(*maps, specs.LinuxIDMapping{})
			idm := &(*maps)[len(*maps)-1]
			if d.null() {
				return true
			}
			return d.object([]string{"containerID", "hostID", "size"}, func(i int) bool {
				switch i {
				case 0:
					return d.uint32(&idm.ContainerID)
				case 1:
					return d.uint32(&idm.HostID)
				}
				return d.uint32(&idm.Size)
			})
		})
	})
}
