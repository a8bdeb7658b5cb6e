package install

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// The functions here edit a JSON document as text: they find byte spans
// with encoding/json's tokenizer and splice, so every byte outside the
// member they add or remove stays as it was. Re-encoding the document
// would reorder keys and reformat values the operator wrote.

// utf8BOM may start a daemon.json written on Windows; dockerd skips it.
var utf8BOM = []byte{0xef, 0xbb, 0xbf}

// jsonMember is one "key": value pair of an object, as byte offsets into
// the document.
type jsonMember struct {
	key        string
	keyStart   int // the key's opening quote
	keyEnd     int // just past the key's closing quote
	valueStart int
	valueEnd   int // just past the value
}

// jsonObject is an object's braces and members, as byte offsets.
type jsonObject struct {
	open, close int // the '{' and the '}'
	members     []jsonMember
}

// jsonDoc is a parsed document whose top level is an object.
type jsonDoc struct {
	name string // the file, for messages
	data []byte
	top  jsonObject
}

// parseJSONDoc checks that data is one JSON object and finds its members.
// Errors name the file, line and column, and say what to do.
func parseJSONDoc(name string, data []byte) (*jsonDoc, error) {
	start := 0
	if bytes.HasPrefix(data, utf8BOM) {
		start = len(utf8BOM)
	}
	var v any
	if err := json.Unmarshal(data[start:], &v); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			at := start + int(se.Offset) - 1 // the offending byte
			if strings.HasPrefix(se.Error(), "unexpected end") {
				at = len(data) // the input ended early: point past its end
			}
			line, col := lineCol(data, at)
			return nil, fmt.Errorf("%s:%d:%d: %v: fix the file by hand", name, line, col, err)
		}
		return nil, fmt.Errorf("%s: %v: fix the file by hand", name, err)
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, fmt.Errorf("%s: the top level is not a JSON object: fix the file by hand", name)
	}
	d := &jsonDoc{name: name, data: data}
	top, err := d.object(start)
	if err != nil {
		return nil, err
	}
	d.top = top
	return d, nil
}

// object reads the object whose '{' is the first non-space byte at or
// after at.
func (d *jsonDoc) object(at int) (jsonObject, error) {
	dec := json.NewDecoder(bytes.NewReader(d.data[at:]))
	tok, err := dec.Token()
	if err != nil {
		return jsonObject{}, fmt.Errorf("%s: %w", d.name, err)
	}
	if tok != json.Delim('{') {
		return jsonObject{}, fmt.Errorf("%s: not a JSON object at offset %d", d.name, at)
	}
	o := jsonObject{open: at + int(dec.InputOffset()) - 1}
	for dec.More() {
		// The comma before a key is consumed with the key, not with the
		// value before it: skip it to find the key's quote.
		keyStart := skipSpace(d.data, at+int(dec.InputOffset()), true)
		tok, err := dec.Token()
		if err != nil {
			return jsonObject{}, fmt.Errorf("%s: %w", d.name, err)
		}
		key, _ := tok.(string)
		keyEnd := at + int(dec.InputOffset())
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return jsonObject{}, fmt.Errorf("%s: %w", d.name, err)
		}
		end := at + int(dec.InputOffset())
		o.members = append(o.members, jsonMember{
			key: key, keyStart: keyStart, keyEnd: keyEnd,
			valueStart: end - len(raw), valueEnd: end,
		})
	}
	if _, err := dec.Token(); err != nil {
		return jsonObject{}, fmt.Errorf("%s: %w", d.name, err)
	}
	o.close = at + int(dec.InputOffset()) - 1
	return o, nil
}

// lookup finds key in o. A key given twice is refused: engines keep the
// last one, a reader of the file may see the first, and either edit would
// be a guess. So is, with fold set, the key spelled in other letter case:
// Go's encoding/json, which dockerd decodes daemon.json with, matches
// struct fields regardless of case.
func (d *jsonDoc) lookup(o jsonObject, key string, fold bool) (jsonMember, bool, error) {
	var found []jsonMember
	for _, m := range o.members {
		if m.key == key || fold && strings.EqualFold(m.key, key) {
			found = append(found, m)
		}
	}
	for _, m := range found {
		if m.key != key {
			line, _ := lineCol(d.data, m.keyStart)
			return jsonMember{}, false, fmt.Errorf("%s:%d: %q is read as %q: rename it and run again", d.name, line, m.key, key)
		}
	}
	switch len(found) {
	case 0:
		return jsonMember{}, false, nil
	case 1:
		return found[0], true, nil
	}
	line, _ := lineCol(d.data, found[1].keyStart)
	return jsonMember{}, false, fmt.Errorf("%s:%d: %q is given twice: keep one and run again", d.name, line, key)
}

// jsonStyle is how an object's members are laid out, so a new member
// looks like its neighbours.
type jsonStyle struct {
	multiline bool
	indent    string // before each member's key (multiline)
	close     string // before the closing brace (multiline)
	unit      string // one level of indentation
	sep       string // between a key and its value
	nl        string // "\n", or "\r\n" in a file written on Windows
}

// style derives the layout of members of o from its first member, or,
// for an empty object, from parent (nil at the top level: two-space
// indented lines, as dockerd's documentation writes daemon.json).
func (d *jsonDoc) style(o jsonObject, parent *jsonStyle) jsonStyle {
	base := lineIndent(d.data, o.open)
	if len(o.members) == 0 {
		s := jsonStyle{multiline: true, unit: "  ", sep: ": ", nl: "\n"}
		if parent != nil {
			s = *parent
		}
		s.indent, s.close = base+s.unit, base
		return s
	}
	m := o.members[0]
	ws := string(d.data[o.open+1 : m.keyStart])
	s := jsonStyle{sep: string(d.data[m.keyEnd:m.valueStart])}
	i := strings.LastIndexByte(ws, '\n')
	if i < 0 {
		return s
	}
	s.multiline, s.indent, s.close, s.nl = true, ws[i+1:], base, "\n"
	if strings.HasSuffix(ws[:i], "\r") {
		s.nl = "\r\n"
	}
	s.unit = strings.TrimPrefix(s.indent, base)
	if s.unit == "" || s.unit == s.indent && base != "" {
		s.unit = "  "
	}
	return s
}

// jsonKV is one member of a value this package writes: v is a string or
// a []jsonKV (a nested object).
type jsonKV struct {
	k string
	v any
}

func (s jsonStyle) member(k string, v any, indent string) string {
	return jsonString(k) + s.sep + s.value(v, indent)
}

// value renders v for a member whose key starts after indent.
func (s jsonStyle) value(v any, indent string) string {
	kvs, ok := v.([]jsonKV)
	if !ok {
		return jsonString(v.(string))
	}
	var b strings.Builder
	b.WriteByte('{')
	inner := indent + s.unit
	for i, e := range kvs {
		if i > 0 {
			b.WriteByte(',')
		}
		if s.multiline {
			b.WriteString(s.nl + inner)
		}
		b.WriteString(s.member(e.k, e.v, inner))
	}
	if s.multiline {
		b.WriteString(s.nl + indent)
	}
	b.WriteByte('}')
	return b.String()
}

// insertFirst returns the document with "k": v as the first member of o,
// laid out in style s. The original bytes all follow unchanged, so
// removeMember gives them back exactly.
func (d *jsonDoc) insertFirst(o jsonObject, s jsonStyle, k string, v any) []byte {
	var text string
	switch {
	case len(o.members) > 0:
		// The whitespace before the old first member goes before the new
		// one too; the old member keeps its own after the comma.
		ws := string(d.data[o.open+1 : o.members[0].keyStart])
		text = ws + s.member(k, v, s.indent) + ","
	case s.multiline:
		text = s.nl + s.indent + s.member(k, v, s.indent) + s.nl + s.close
	default:
		text = s.member(k, v, "")
	}
	return splice(d.data, o.open+1, o.open+1, text)
}

// removeMember returns the document without member i of o: the exact
// inverse of insertFirst for a member it inserted.
func (d *jsonDoc) removeMember(o jsonObject, i int) []byte {
	m := o.members[i]
	switch {
	case len(o.members) == 1:
		to := m.valueEnd
		for _, nl := range []string{"\r\n", "\n"} {
			if tail := nl + lineIndent(d.data, o.open); bytes.HasPrefix(d.data[to:], []byte(tail)) {
				to += len(tail)
				break
			}
		}
		return splice(d.data, o.open+1, to, "")
	case i == 0:
		comma := skipSpace(d.data, m.valueEnd, false) // at the ','
		return splice(d.data, o.open+1, comma+1, "")
	}
	return splice(d.data, o.members[i-1].valueEnd, m.valueEnd, "")
}

// replaceValue returns the document with member m's value replaced by v.
func (d *jsonDoc) replaceValue(m jsonMember, s jsonStyle, v any) []byte {
	return splice(d.data, m.valueStart, m.valueEnd, s.value(v, lineIndent(d.data, m.keyStart)))
}

func splice(data []byte, from, to int, text string) []byte {
	out := make([]byte, 0, len(data)-(to-from)+len(text))
	out = append(out, data[:from]...)
	out = append(out, text...)
	return append(out, data[to:]...)
}

// jsonString quotes s as JSON without HTML escaping (paths may hold '&').
func jsonString(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return strings.TrimSuffix(b.String(), "\n")
}

// skipSpace returns the index of the first byte at or after i that is not
// JSON whitespace (or a comma, if commas is set).
func skipSpace(data []byte, i int, commas bool) int {
	for i < len(data) {
		switch data[i] {
		case ' ', '\t', '\n', '\r':
		case ',':
			if !commas {
				return i
			}
		default:
			return i
		}
		i++
	}
	return i
}

// lineIndent is the leading whitespace of the line holding data[i].
func lineIndent(data []byte, i int) string {
	start := bytes.LastIndexByte(data[:i], '\n') + 1
	end := start
	for end < i && (data[end] == ' ' || data[end] == '\t') {
		end++
	}
	return string(data[start:end])
}

// lineCol is the 1-based line and column of data[i].
func lineCol(data []byte, i int) (int, int) {
	i = max(0, min(i, len(data)))
	line := 1 + bytes.Count(data[:i], []byte("\n"))
	return line, i - bytes.LastIndexByte(data[:i], '\n')
}
