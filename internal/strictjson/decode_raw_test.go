package strictjson

import "testing"

// Raw of a scalar must stay the scalar's own text after the decoder reads on
// (a Raw aliasing jsontext's buffer once read back "1234" as "#234").
func TestDecodeRawScalarsSurviveLaterReads(t *testing.T) {
	for _, jsonc := range []bool{false, true} {
		in := []byte(`{"a": 1234, "b": "xyz", "c": [true, 5], "d": {"e": 77}} // c`)
		if !jsonc {
			in = in[:len(in)-5]
		}
		n, rs := Decode(in, jsonc)
		if n == nil {
			t.Fatal(rs)
		}
		if string(n.Get("a").Raw) != "1234" || string(n.Get("b").Raw) != `"xyz"` || string(n.Get("c").Elems[1].Raw) != "5" || string(n.Get("d").Get("e").Raw) != "77" {
			t.Errorf("jsonc=%v raw a=%q b=%q c1=%q e=%q", jsonc, n.Get("a").Raw, n.Get("b").Raw, n.Get("c").Elems[1].Raw, n.Get("d").Get("e").Raw)
		}
	}
}
