package install

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// member is one "key": value pair of a JSON object, as byte offsets.
type member struct {
	key        string
	keyStart   int // the opening quote of the key
	valueStart int
	valueEnd   int // just past the value
}

// object is a JSON object's span and members.
type object struct {
	open, close int // offsets of '{' and '}'
	members     []member
}

// parseObject reads the object starting at data[at] (whitespace allowed).
func parseObject(data []byte, at int) (*object, error) {
	dec := json.NewDecoder(bytes.NewReader(data[at:]))
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, errors.New("not a JSON object")
	}
	o := &object{open: at + int(dec.InputOffset()) - 1}
	for dec.More() {
		before := at + int(dec.InputOffset())
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, err
		}
		end := at + int(dec.InputOffset())
		m := member{key: key, keyStart: skipSpaceComma(data, before), valueEnd: end}
		m.valueStart = end - len(raw)
		o.members = append(o.members, m)
	}
	if _, err := dec.Token(); err != nil { // '}'
		return nil, err
	}
	o.close = at + int(dec.InputOffset()) - 1
	return o, nil
}

func skipSpaceComma(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r' || data[i] == ',') {
		i++
	}
	return i
}

func (o *object) find(key string) (member, int, bool) {
	for i, m := range o.members {
		if m.key == key {
			return m, i, true
		}
	}
	return member{}, -1, false
}

// insertFirst adds `"key": value` as the object's first member, indented
// like the member it goes before, so everything else keeps its bytes.
func insertFirst(data []byte, o *object, key string, value []byte) []byte {
	k, _ := json.Marshal(key)
	text := string(k) + ": " + string(value)
	var out []byte
	out = append(out, data[:o.open+1]...)
	if len(o.members) == 0 {
		out = append(out, text...)
		out = append(out, data[o.open+1:]...)
		return out
	}
	ws := data[o.open+1 : o.members[0].keyStart]
	out = append(out, ws...)
	out = append(out, text...)
	out = append(out, ',')
	out = append(out, data[o.open+1:]...)
	return out
}

// removeMember deletes member i of o: for a first member the exact
// inverse of insertFirst, otherwise the member with the comma before it.
func removeMember(data []byte, o *object, i int) []byte {
	m := o.members[i]
	var from, to int
	switch {
	case len(o.members) == 1:
		from, to = o.open+1, o.close
	case i == 0:
		from = o.open + 1
		to = m.valueEnd + bytes.IndexByte(data[m.valueEnd:], ',') + 1
	default:
		from, to = o.members[i-1].valueEnd, m.valueEnd
	}
	return append(append([]byte{}, data[:from]...), data[to:]...)
}

// jsonError gives a malformed file's error with its line and column.
func jsonError(path string, data []byte, err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		line, col := 1, 1
		for _, c := range data[:max(0, min(int(se.Offset)-1, len(data)))] {
			if c == '\n' {
				line, col = line+1, 1
			} else {
				col++
			}
		}
		return fmt.Errorf("%s:%d:%d: %v: fix the file by hand, nothing was changed", path, line, col, err)
	}
	return fmt.Errorf("%s: %v: fix the file by hand, nothing was changed", path, err)
}
