package oci

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// realConfigs are config.json files as engines write them: `runc spec`'s
// and a Docker-like one (seccomp profile, mounts, annotations).
func realConfigs(t testing.TB) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, n := range []string{"config-runc-spec.json", "config-docker-like.json"} {
		data, err := os.ReadFile(filepath.Join("testdata", n))
		if err != nil {
			t.Fatal(err)
		}
		out[n] = string(data)
	}
	return out
}

// Documents the fast decoder must decide (ok) itself: what engines write.
var fastStates = []string{
	`{"ociVersion":"1.0.2","id":"c1","status":"creating","pid":4242,"bundle":"/run/b"}`,
	`{"ociVersion":"1.0.0","id":"c1","status":"created","pid":0,"bundle":"/run/b","root":"/run/crun"}`,
	`{"ociVersion":"1.2.1","id":"c1","status":"creating","pid":7,"bundle":"/run/containerd/io.containerd.runtime.v2.task/k8s.io/c1","annotations":{"io.kubernetes.cri.container-type":"container","a":"x\u0026y \"q\" \u00e9 \ud83d\ude00"}}`,
	` {"pid":1,"bundle":"/b","annotations":null} `,
	`null`,
}

// Documents on which encoding/json's rules are easy to get wrong.
var trickyDocs = []string{
	`{"PID":1,"Bundle":"/b"}`,
	`{"pid":1,"pid":2,"bundle":"/b"}`,
	`{"pid":1.0,"bundle":"/b"}`,
	`{"pid":1e2,"bundle":"/b"}`,
	`{"pid":-0,"bundle":"/b"}`,
	`{"pid":99999999999999999999,"bundle":"/b"}`,
	`{"pid":"1","bundle":"/b"}`,
	`{"pid":null,"bundle":null,"id":null}`,
	`{"bund\u006ce":"/b","pid":1}`,
	"{\"bundle\":\"/b\xff\xfe\",\"annotations\":{\"k\xff\":\"v\\ud800\",\"k\":\"\\ud800\\u0041\",\"k2\":\"\\udc00\\ud800\"}}",
	`{"annotations":{"a":"1","a":"2","b":null}}`,
	`{"annotations":{"a":1}}`,
	`{"annotations":[]}`,
	"{\"annotation\u017f\":{\"a\":\"b\"}}",
	`{"root":{"path":"rootfs","readonly":true},"root":{"readonly":false}}`,
	`{"root":{"path":"rootfs","readonly":"yes"}}`,
	`{"root":null,"process":null,"linux":null,"mounts":null,"annotations":null}`,
	`{"process":{"env":[]},"mounts":[],"linux":{"devices":[],"namespaces":[],"resources":{"devices":[]}}}`,
	`{"process":{"env":["A=1",null,"B=\\u00e9\\/\\\\"]}}`,
	`{"process":{"Env":["A=1"],"ENV":["B=2"]}}`,
	`{"process":{"env":"A=1"}}`,
	`{"linux":{"devices":[{"path":"/dev/dxg","type":"c","major":10,"minor":63,"fileMode":438,"uid":0,"gid":0},null]}}`,
	`{"linux":{"devices":[{"path":"/dev/x","fileMode":4294967296}]}}`,
	`{"linux":{"devices":[{"path":"/dev/x","uid":-1}]}}`,
	`{"linux":{"devices":[{"path":"/dev/x","major":9223372036854775808}]}}`,
	`{"linux":{"resources":{"devices":[{"allow":false,"access":"rwm"},{"allow":true,"type":"c","major":10,"minor":null,"access":"rw"},null]}}}`,
	`{"linux":{"resources":{"devices":[{"allow":1}]}}}`,
	`{"linux":{"namespaces":[{"type":"pid"},{"type":"user","path":"/proc/1/ns/user"},null,{"type":"mount","Type":"x"}]}}`,
	`{"mounts":[{"destination":"/proc","type":"proc","source":"proc","options":["nosuid"],"uidMappings":[{"containerID":0,"hostID":100000,"size":65536}],"gidMappings":null},null]}`,
	`{"mounts":[{"destination":"/x","uidMappings":[{"containerID":0,"hostID":100000,"size":4294967296}]}]}`,
	`{"mounts":{"destination":"/x"}}`,
	`{"x":{"y":[1,2,{"z":"]}\"{"}],"w":true},"root":{"path":"r"},"v":[[[]]],"n":-1.5e-3}`,
	`[]`, `1`, `"s"`, `true`, `null`, `{}`, ``, `{`, `{"a"}`, `{"root":{"path":"r"}} x`,
	// Grammar: what json.Valid rejects must not decode.
	`{"pid":01,"bundle":"/b"}`, `{"pid":-,"bundle":"/b"}`, `{"pid":1.,"bundle":"/b"}`, `{"pid":1e,"bundle":"/b"}`,
	`{"pid":+1,"bundle":"/b"}`, `{"pid":.5}`, `{"x":1.5e+3,"y":-0.0E-0,"z":[0,-1,2e9]}`,
	`{"bundle":"/b",}`, `{,"bundle":"/b"}`, `{"bundle":"/b",,"pid":1}`, `{"bundle" "/b"}`, `{"bundle":}`,
	`{"bundle":"/b"`, `{"bundle":"/b`, `{"bundle":"/b\"}`, `{"bundle":"\x"}`, `{"bundle":"\u12"}`, `{"bundle":"\u12G4"}`,
	"{\"bundle\":\"/b\tc\"}", "{\"bundle\":\"/b\x00\"}", "{\"bundle\":\"/b\x7f\"}",
	`{"x":[1,]}`, `{"x":[,1]}`, `{"x":[1 2]}`, `{"x":{"a":1,}}`, `{"x":{1:2}}`, `{"x":tru}`, `{"x":nul}`, `{"x":falsey}`,
	`{"root":nullx}`, `{"root":{"readonly":truex}}`, `{"annotations":{"a":"b",}}`, `{"annotations":{"a" "b"}}`,
	`{"process":{"env":["a",]}}`, `{"process":{"env":["a" "b"]}}`, `{"x":"a"}{}`, " \n{}\r\t ", `{"x":[[[[[[[[[[]]]]]]]]]]}`,
	`{"x":` + strings.Repeat("[", 1001) + strings.Repeat("]", 1001) + `}`,
	`{"x":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}`,
}

// checkSame fails when the fast decoder decides a document differently
// from encoding/json; it returns whether the fast path decided.
func checkSame(t *testing.T, doc string) (stateFast, specFast bool) {
	t.Helper()
	data := []byte(doc)
	var wantSt State
	errSt := json.Unmarshal(data, &wantSt)
	gotSt, err := decodeState(data)
	if (err == nil) != (errSt == nil) || err != nil && err.Error() != errSt.Error() || err == nil && !reflect.DeepEqual(gotSt, wantSt) {
		t.Errorf("state %q:\n fast %#v, %v\n json %#v, %v", doc, gotSt, err, wantSt, errSt)
	}
	var wantSpec Spec
	errSpec := json.Unmarshal(data, &wantSpec)
	gotSpec, err := decodeSpec(data)
	if (err == nil) != (errSpec == nil) || err != nil && err.Error() != errSpec.Error() || err == nil && !reflect.DeepEqual(*gotSpec, wantSpec) {
		t.Errorf("spec %q:\n fast %#v, %v\n json %#v, %v", doc, gotSpec, err, wantSpec, errSpec)
	}
	_, okSt := fastState(data)
	_, okSpec := fastSpec(data)
	return okSt, okSpec
}

func TestFastDecodeMatchesEncodingJSON(t *testing.T) {
	for _, doc := range append(append([]string{}, fastStates...), trickyDocs...) {
		checkSame(t, doc)
	}
	for name, doc := range realConfigs(t) {
		if _, ok := checkSame(t, doc); !ok {
			t.Errorf("%s: decoded by encoding/json, not the fast path", name)
		}
		// The same document with its keys in upper case still decodes
		// the same.
		checkSame(t, strings.ToUpper(doc))
	}
	for _, doc := range fastStates {
		if ok, _ := checkSame(t, doc); !ok {
			t.Errorf("state %s: decoded by encoding/json, not the fast path", doc)
		}
	}
}

// FuzzFastDecode: for any input, ReadState's and LoadSpec's decoding gives
// what json.Unmarshal gives, result or error.
func FuzzFastDecode(f *testing.F) {
	for _, doc := range append(append([]string{}, fastStates...), trickyDocs...) {
		f.Add(doc)
	}
	for _, doc := range realConfigs(f) {
		f.Add(doc)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		checkSame(t, doc)
	})
}
