package config

import (
	"strconv"

	"github.com/pelletier/go-toml/v2/unstable"
)

// decodeFast fills c from data without reflection, for the documents that
// are plainly within what Config supports: top-level keys and one
// [device_plugin] table, each key spelled exactly as its tag, bare or
// quoted but never dotted, set at most once, with a value of its field's
// kind (a string, an array of strings, a plain decimal integer, a bool).
// For anything else it reports false and leaves c untouched, and the
// caller decodes with go-toml's Unmarshal, so every error, and every
// document that is legal TOML but unusual (case-folded keys, hex integers,
// inline tables), keeps the one meaning and the one message Unmarshal
// gives it. FuzzDecodeFast holds the two to the same result.
//
// Why: a hook process loads the configuration once, and go-toml's first
// reflective Unmarshal in a fresh process costs most of a millisecond in
// page faults on a nested WSL guest; the AST parser costs far less.
func (c *Config) decodeFast(data []byte) bool {
	out := *c
	var (
		p     unstable.Parser
		table bool   // inside [device_plugin]
		seen  uint64 // keys set so far, one bit each (keys has at most 64)
	)
	p.Reset(data)
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table:
			name, ok := simpleKey(e)
			if !ok || name != deviceTable || table {
				return false
			}
			table = true
		case unstable.KeyValue:
			name, ok := simpleKey(e)
			if !ok {
				return false
			}
			bit, ok := out.set(table, name, e.Value())
			if !ok || seen&bit != 0 {
				return false
			}
			seen |= bit
		default:
			return false
		}
	}
	if p.Error() != nil {
		return false
	}
	*c = out
	return true
}

// simpleKey returns the one part of e's key; a dotted key reports false.
func simpleKey(e *unstable.Node) (string, bool) {
	it := e.Key()
	if !it.Next() {
		return "", false
	}
	name := string(it.Node().Data)
	if it.Next() {
		return "", false
	}
	return name, true
}

// set stores v under the key name, at top level or in [device_plugin],
// and returns the key's bit; false means the key or the value's kind is
// not one the fast path takes.
func (c *Config) set(table bool, name string, v *unstable.Node) (uint64, bool) {
	for i, k := range keys {
		if k.name != name || table != (k.table == deviceTable) {
			continue
		}
		switch p := k.field(c).(type) {
		case *string:
			return 1 << i, str(p, v)
		case *[]string:
			return 1 << i, strs(p, v)
		case *int:
			return 1 << i, integer(p, v)
		case *bool:
			return 1 << i, boolean(p, v)
		}
		return 0, false
	}
	return 0, false
}

func str(dst *string, v *unstable.Node) bool {
	if v.Kind != unstable.String {
		return false
	}
	// Data may point into the parser's input or buffers: copy it.
	*dst = string(v.Data)
	return true
}

func strs(dst *[]string, v *unstable.Node) bool {
	if v.Kind != unstable.Array {
		return false
	}
	var list []string
	it := v.Children()
	for it.Next() {
		n := it.Node()
		if n.Kind != unstable.String {
			return false
		}
		list = append(list, string(n.Data))
	}
	if list == nil {
		return false // an empty array: leave its exact shape to Unmarshal
	}
	*dst = list
	return true
}

// integer takes only a plain decimal: no sign, underscores or base prefix.
func integer(dst *int, v *unstable.Node) bool {
	if v.Kind != unstable.Integer || len(v.Data) == 0 || len(v.Data) > 9 {
		return false
	}
	for _, b := range v.Data {
		if b < '0' || b > '9' {
			return false
		}
	}
	n, err := strconv.Atoi(string(v.Data))
	if err != nil {
		return false
	}
	*dst = n
	return true
}

func boolean(dst *bool, v *unstable.Node) bool {
	if v.Kind != unstable.Bool {
		return false
	}
	switch string(v.Data) {
	case "true":
		*dst = true
	case "false":
		*dst = false
	default:
		return false
	}
	return true
}
