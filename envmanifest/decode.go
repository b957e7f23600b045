package envmanifest

import (
	"bytes"
	"sync"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/sandbox-resume/sandbox-resume/internal/strictjson"
)

// decode is strictjson.Decode with its problems as refusals: each
// strictjson kind is the refusal class of the same name (docs/design.md
// "Ingestion"), at the problem's pointer, the message led by line:column
// when the problem has a place.
func decode(data []byte, jsonc bool) (*strictjson.Node, []Refusal) {
	root, errs := strictjson.Decode(data, jsonc)
	return root, refusalsOf(errs)
}

// refusalsOf maps problems of the strict decoder to refusals, in order: the
// class is the kind's name (strictjson.Syntax is ClassSyntax, Encoding
// ClassEncoding, Limit ClassLimit, Number ClassNumber, DuplicateKey
// ClassDuplicateKey), the pointer the problem's, the message
// strictjson.Error.Text (line:column first when it has a place). nil for
// no problems.
func refusalsOf(errs []*strictjson.Error) []Refusal {
	if len(errs) == 0 {
		return nil
	}
	rs := make([]Refusal, len(errs))
	for i, e := range errs {
		rs[i] = Refusal{Pointer: e.Pointer, Class: kindClass(e.Kind), Message: e.Text()}
	}
	return rs
}

// kindClass is the refusal class of a strictjson problem kind.
func kindClass(k strictjson.ErrorKind) Class {
	switch k {
	case strictjson.Syntax:
		return ClassSyntax
	case strictjson.Encoding:
		return ClassEncoding
	case strictjson.Limit:
		return ClassLimit
	case strictjson.Number:
		return ClassNumber
	case strictjson.DuplicateKey:
		return ClassDuplicateKey
	}
	return ClassInvalidValue
}

// readBackOptions read JSON this package wrote itself (JCS output): it has
// no repeated name and is valid UTF-8, so the checks that would find them
// are off.
var readBackOptions = []jsontext.Options{
	jsontext.AllowDuplicateNames(true),
	jsontext.AllowInvalidUTF8(true),
}

// pooledDecoder is a reusable jsontext.Decoder reading a bytes.Buffer (a
// new Decoder and the growth of its state stacks cost more than the
// read-back itself).
type pooledDecoder struct {
	src bytes.Buffer
	dec jsontext.Decoder
}

var pooledDecoders = sync.Pool{New: func() any { return new(pooledDecoder) }}

// getDecoder returns a pooled Decoder reading src in place with
// readBackOptions; give it back with putDecoder once no Value it returned
// is in use.
func getDecoder(src []byte) *pooledDecoder {
	d := pooledDecoders.Get().(*pooledDecoder)
	d.src = *bytes.NewBuffer(src)
	d.dec.Reset(&d.src, readBackOptions...)
	return d
}

// putDecoder drops d's reference to its input and returns it to the pool.
func putDecoder(d *pooledDecoder) {
	d.src = bytes.Buffer{}
	d.dec.Reset(&d.src)
	pooledDecoders.Put(d)
}
