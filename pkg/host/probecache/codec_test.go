package probecache

import (
	"reflect"
	"testing"

	"github.com/wsl-gpu-hook/wsl-gpu-hook/pkg/start/ldcache"
)

// fill sets every field reachable from v (a pointer) to a value that is not
// its zero, different from field to field; lists get two elements.
func fill(v reflect.Value, n *uint64) {
	switch v.Kind() {
	case reflect.Pointer:
		fill(v.Elem(), n)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), n)
			}
		}
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 2, 2)
		for i := range 2 {
			fill(s.Index(i), n)
		}
		v.Set(s)
	case reflect.String:
		*n++
		v.SetString("s" + string(rune('a'+*n%26)) + string(rune('a'+*n/26%26)))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int32, reflect.Int64:
		*n++
		v.SetInt(-int64(*n))
		if v.Kind() == reflect.Int {
			v.SetInt(int64(*n)) // indexes are not negative
		}
	case reflect.Uint8, reflect.Uint32, reflect.Uint64:
		*n++
		v.SetUint(*n | 1<<(v.Type().Bits()-1))
	default:
		panic("fill: add " + v.Kind().String() + " to the codec and to fill")
	}
}

// TestCodecCoversEveryField: a key and a probe with every field set come
// back equal, so a field added to a cached type (dxcore.Adapter, say) and
// not to the codec fails here instead of being dropped from the cache.
func TestCodecCoversEveryField(t *testing.T) {
	var n uint64
	k, p := &Key{}, &Probe{}
	fill(reflect.ValueOf(k), &n)
	fill(reflect.ValueOf(p), &n)
	k2, p2, err := decode(encode(k, p))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(k, k2) {
		t.Errorf("key:\n got %+v\nwant %+v", k2, k)
	}
	if !reflect.DeepEqual(p, p2) {
		t.Errorf("probe:\n got %+v\nwant %+v", p2, p)
	}
	// nil and empty loader entries differ (validate checks which).
	p.Ldcache = []ldcache.Entry{}
	if _, p3, err := decode(encode(k, p)); err != nil || p3.Ldcache == nil {
		t.Errorf("empty loader entries came back as %#v, %v", p3, err)
	}
	p.Ldcache = nil
	if _, p3, err := decode(encode(k, p)); err != nil || p3.Ldcache != nil {
		t.Errorf("absent loader entries came back as %#v, %v", p3, err)
	}
}
