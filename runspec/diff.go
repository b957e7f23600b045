package runspec

import (
	"encoding/json"

	"github.com/go-json-experiment/json/jsontext"
)

// specComparer collects the drift of one comparison.
type specComparer struct {
	opts Options
	out  []sidedSpecDrift
}

// sidedSpecDrift is an entry with the side its Pointer points into.
type sidedSpecDrift struct {
	e           SpecDrift
	offeredSide bool
}

// emit reports a difference between r and o (either may be nil: absent).
func (c *specComparer) emit(r, o *specValue, allowed bool) {
	var s sidedSpecDrift
	s.e.Allowed = allowed
	if r != nil {
		s.e.Pointer, s.e.Recorded = r.ptr, compactJSON(r.raw)
	}
	if o != nil {
		s.e.Offered = compactJSON(o.raw)
		if r == nil {
			s.e.Pointer, s.offeredSide = o.ptr, true
		} else if o.ptr != r.ptr {
			s.e.OfferedPointer = o.ptr
		}
	}
	c.out = append(c.out, s)
}

// compactJSON copies a value's JSON text without insignificant
// whitespace; numbers and strings stay as written.
func compactJSON(raw []byte) json.RawMessage {
	v := jsontext.Value(append([]byte(nil), raw...))
	if err := v.Compact(); err != nil {
		return json.RawMessage(append([]byte(nil), raw...))
	}
	return json.RawMessage(v)
}

// stringJSON is the JSON text of a string as encoding/json writes it (HTML
// characters escaped), the form of a required "NAME=value" entry in the
// recorded side of a process.env drift. Marshalling a string cannot fail.
func stringJSON(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}
