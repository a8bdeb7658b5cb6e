package jsonlex

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// seeds are documents on which JSON's grammar and encoding/json's
// decoding are easy to get wrong.
var seeds = []string{
	`null`, `true`, `false`, `0`, `-0`, `1`, `-1`, `4294967295`, `4294967296`, `-1.5e-3`, `1.0`, `1e2`,
	`9223372036854775807`, `9223372036854775808`, `01`, `-`, `1.`, `1e`, `+1`, `.5`, `tru`, `nul`, `falsey`,
	`""`, `"a"`, `"\u00e9\ud83d\ude00"`, `"\ud800"`, `"\ud800\u0041"`, `"\udc00\ud800"`, `"\/\\\"\b\f\n\r\t"`,
	"\"\xff\xfe\"", `"\x"`, `"\u12"`, `"\u12G4"`, "\"a\tb\"", "\"\x00\"", "\"\x7f\"", `"a`, `"a\"`,
	`[]`, `[null]`, `["a",null,"b"]`, `["a",]`, `[,"a"]`, `["a" "b"]`, `[1]`, `[[]]`,
	`{}`, `{"a":"1","a":"2","b":null}`, `{"a":1}`, `{"k\u0041":"v"}`, "{\"k\xff\":\"v\"}", `{"a":"b",}`, `{"a" "b"}`, `{1:2}`,
	`{"x":{"y":[1,2,{"z":"]}\"{"}],"w":true},"v":[[[]]],"n":-1.5e-3}`,
	" \n{}\r\t ", `{}{}`, `1 2`, ``, ` `,
}

// valueTargets decode one document into each type a Decoder fills, with
// the Decoder (fast) and with json.Unmarshal.
var valueTargets = []struct {
	name string
	fast func(d *Decoder) (any, bool)
	json func(doc []byte) (any, error)
}{
	{"string", func(d *Decoder) (any, bool) { var v string; ok := d.Str(&v) && d.End(); return v, ok },
		func(doc []byte) (any, error) { var v string; err := json.Unmarshal(doc, &v); return v, err }},
	{"[]string", func(d *Decoder) (any, bool) { var v []string; ok := d.Strs(&v) && d.End(); return v, ok },
		func(doc []byte) (any, error) { var v []string; err := json.Unmarshal(doc, &v); return v, err }},
	{"map[string]string", func(d *Decoder) (any, bool) { var v map[string]string; ok := d.StringMap(&v) && d.End(); return v, ok },
		func(doc []byte) (any, error) { var v map[string]string; err := json.Unmarshal(doc, &v); return v, err }},
	{"int64", func(d *Decoder) (any, bool) { var v int64; ok := d.Int64(&v) && d.End(); return v, ok },
		func(doc []byte) (any, error) { var v int64; err := json.Unmarshal(doc, &v); return v, err }},
	{"uint32", func(d *Decoder) (any, bool) { var v uint32; ok := d.Uint32(&v) && d.End(); return v, ok },
		func(doc []byte) (any, error) { var v uint32; err := json.Unmarshal(doc, &v); return v, err }},
	{"bool", func(d *Decoder) (any, bool) { var v bool; ok := d.Bool(&v) && d.End(); return v, ok },
		func(doc []byte) (any, error) { var v bool; err := json.Unmarshal(doc, &v); return v, err }},
}

// checkDoc fails when the Decoder decides doc differently from
// encoding/json: Skip accepts exactly what json.Valid accepts, and each
// value method decodes exactly what json.Unmarshal decodes into its type,
// to the same value. Both directions hold for documents too short to
// nest MaxDepth deep.
func checkDoc(t *testing.T, doc string) {
	t.Helper()
	b := []byte(doc)
	shallow := len(b) < 2*MaxDepth
	d := NewDecoder(b)
	if ok, valid := d.Skip() && d.End(), json.Valid(b); ok && !valid || !ok && valid && shallow {
		t.Errorf("Skip+End(%q) = %v, json.Valid = %v", doc, ok, valid)
	}
	for _, tg := range valueTargets {
		d := NewDecoder(b)
		got, ok := tg.fast(&d)
		want, err := tg.json(b)
		switch {
		case ok && err != nil:
			t.Errorf("%s %q: decoded %#v, json.Unmarshal fails: %v", tg.name, doc, got, err)
		case ok && !reflect.DeepEqual(got, want):
			t.Errorf("%s %q: decoded %#v, json.Unmarshal %#v", tg.name, doc, got, want)
		case !ok && err == nil && shallow:
			t.Errorf("%s %q: not decoded, json.Unmarshal gives %#v", tg.name, doc, want)
		}
	}
}

func TestMatchesEncodingJSON(t *testing.T) {
	for _, doc := range seeds {
		checkDoc(t, doc)
	}
	deep := strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1)
	if d := NewDecoder([]byte(deep)); d.Skip() {
		t.Errorf("Skip walked %d levels, past MaxDepth", MaxDepth+1)
	}
	ok := strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth)
	if d := NewDecoder([]byte(ok)); !d.Skip() || !d.End() {
		t.Errorf("Skip refused %d levels", MaxDepth)
	}
}

// FuzzDecoder: for any input, the Decoder accepts and decodes what
// encoding/json does, or reports false so its caller falls back.
func FuzzDecoder(f *testing.F) {
	for _, doc := range seeds {
		f.Add(doc)
	}
	f.Fuzz(checkDoc)
}

// TestObject pins how Object matches keys to field names: as
// encoding/json matches struct fields, and false where it cannot be sure.
func TestObject(t *testing.T) {
	names := []string{"path", "readOnly"}
	for _, tc := range []struct {
		doc  string
		want string // the fields seen, by index, and their values
		ok   bool
	}{
		{`{"path":"a","readOnly":true}`, `0:"a" 1:true`, true},
		{`{"PATH":"a","readonly":true}`, `0:"a" 1:true`, true},
		{`{"x":{"path":"no"},"path":"a"}`, `0:"a"`, true},
		{`{}`, ``, true},
		{`{"path":"a","Path":"b"}`, ``, false},      // encoding/json takes the last
		{`{"p\u0061th":"a"}`, ``, false},            // escaped key
		{"{\"\u017fath\":\"a\"}", ``, false},        // non-ASCII key: may fold
		{`{"path":"a",}`, ``, false},                // grammar
		{`{"path":"a" "readOnly":true}`, ``, false}, // grammar
		{`["path"]`, ``, false},                     // not an object
		{`{"pathx":"a","pat":"b"}`, ``, true},       // lengths differ
	} {
		d := NewDecoder([]byte(tc.doc))
		var seen []string
		ok := d.Object(names, func(i int) bool {
			start := d.i
			ok := d.Skip()
			seen = append(seen, fmt.Sprintf("%d:%s", i, bytes.TrimSpace(d.b[start:d.i])))
			return ok
		}) && d.End()
		if ok != tc.ok || ok && strings.Join(seen, " ") != tc.want {
			t.Errorf("Object(%s) = %v %q, want %v %q", tc.doc, ok, strings.Join(seen, " "), tc.ok, tc.want)
		}
	}
}
