package strictjson

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/tailscale/hujson"
)

// Limits of the strict decoder (docs/design.md "Ingestion": size and depth).
const (
	// MaxInputBytes is the largest input Decode accepts, in raw bytes
	// (a leading BOM included): 1 MiB.
	MaxInputBytes = 1 << 20
	// MaxDepth is the deepest nesting Decode accepts; the top-level object
	// is depth 1.
	MaxDepth = 64
	// maxSafeInteger is 2^53−1, the largest whole number every IEEE-754
	// double consumer reads exactly (RFC 7493 §2.2).
	maxSafeInteger = 1<<53 - 1
)

var utf8BOM = []byte("\xef\xbb\xbf")

// Decode parses data strictly (docs/design.md "Ingestion").
//
// With jsonc true, exactly one leading UTF-8 BOM is stripped and comments
// and single trailing commas are accepted (tailscale/hujson Standardize);
// with jsonc false the input must be strict RFC 8259 JSON (no BOM).
//
// Fatal problems return (nil, one *Error at pointer "", with the line and
// column where there is one): Syntax (the text does not parse, also empty
// input and a top level that is not an object), Encoding (invalid raw
// UTF-8), Limit (more than MaxInputBytes, or nesting deeper than MaxDepth).
//
// Otherwise Decode returns the root object and the non-fatal problems, in
// document order, each at its JSON Pointer and without a position:
// DuplicateKey (one per duplicated name, at its pointer), Encoding (Unicode
// noncharacters and lone-surrogate escapes in names and string values after
// unescaping; a bad name is reported at the enclosing object's pointer) and
// Number (RFC 7493 §2.2 I-JSON limits: a whole value beyond ±(2^53−1), a
// token naming a different decimal than its shortest float64 form,
// underflow to zero, overflow; -0 is accepted).
func Decode(data []byte, jsonc bool) (*Node, []*Error) {
	if len(data) > MaxInputBytes {
		return nil, fatal(Limit, 0, 0, fmt.Sprintf("input is %d bytes, more than the %d-byte limit", len(data), MaxInputBytes))
	}
	if !utf8.Valid(data) {
		off := firstInvalidUTF8(data)
		l, c := lineColumn(data, off)
		return nil, fatal(Encoding, l, c, fmt.Sprintf("invalid UTF-8 byte 0x%02x", data[off]))
	}
	shift := 0
	if jsonc && bytes.HasPrefix(data, utf8BOM) {
		data = data[len(utf8BOM):]
		shift = len(utf8BOM)
	}
	// Standard JSON needs no stripping: skip hujson (and its copy) when
	// the input has no comment opener, and fall back to it if the strict
	// walk fails (a trailing comma). Text whose only "//" follow a ':'
	// (URLs such as https://…) is walked strictly first too; if that walk
	// fails for any reason, hujson decides, as it always did for text with
	// a comment opener. Text the strict walk accepts is standard JSON,
	// which hujson would hand back unchanged.
	opener := jsonc && (bytes.Contains(data, []byte("//")) || bytes.Contains(data, []byte("/*")))
	if opener && !onlyURLSlashes(data) {
		return decodeJSONC(data, shift)
	}
	root, errs, ferr := walk(data)
	if ferr != nil {
		if opener || (jsonc && ferr.kind == Syntax) {
			return decodeJSONC(data, shift)
		}
		return nil, ferr.errors(data, shift)
	}
	return root, errs
}

// onlyURLSlashes reports whether every "//" in b follows a ':' and b holds
// no "/*": text that probably has no comment, only URLs, so a strict walk
// is worth trying before hujson. It only chooses the order; it decides
// nothing about the text.
func onlyURLSlashes(b []byte) bool {
	if bytes.Contains(b, []byte("/*")) {
		return false
	}
	for i := 0; ; {
		j := bytes.Index(b[i:], []byte("//"))
		if j < 0 {
			return true
		}
		i += j
		if i == 0 || b[i-1] != ':' {
			return false
		}
		i += 2
	}
}

// decodeJSONC strips comments and trailing commas with hujson (offsets are
// preserved, so line:column stays true to the input) and walks the result.
func decodeJSONC(data []byte, shift int) (*Node, []*Error) {
	if len(bytes.TrimLeft(data, " \t\r\n")) == 0 {
		return nil, fatal(Syntax, 1, 1+shift, "empty input: the top level must be an object")
	}
	// hujson recurses without a bound (1 MiB of "[" costs it ~1 s and
	// ~1 GB), so the depth limit is enforced before it runs.
	if off := deeperThan(data, MaxDepth); off >= 0 {
		l, c := lineColumn(data, off)
		if l == 1 {
			c += shift
		}
		return nil, fatal(Limit, l, c, fmt.Sprintf("nesting deeper than %d levels", MaxDepth))
	}
	// hujson wants a line comment closed by a newline; JSONC lets one end
	// the file. The extra byte changes no offset of the input.
	buf := make([]byte, len(data), len(data)+1)
	copy(buf, data)
	buf = append(buf, '\n')
	v, err := hujson.Parse(buf)
	if err != nil {
		l, c, msg := hujsonError(err)
		if l == 1 {
			c += shift
		}
		return nil, fatal(Syntax, l, c, msg)
	}
	v.Standardize()
	std := v.Pack()
	root, errs, ferr := walk(std)
	if ferr != nil {
		return nil, ferr.errors(std, shift)
	}
	return root, errs
}

// deeperThan returns the offset of the first "[" or "{" that opens
// nesting level limit+1 in JSONC text, or -1. It is a guard, not a parser:
// it only tracks strings (with backslash escapes) and comments so brackets
// inside them do not count; hujson still decides whether the text parses.
// Text with at most limit opening brackets is not scanned.
func deeperThan(b []byte, limit int) int {
	if bytes.Count(b, []byte("["))+bytes.Count(b, []byte("{")) <= limit {
		return -1
	}
	depth := 0
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '"':
			for i++; i < len(b) && b[i] != '"'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
		case '/':
			if i+1 < len(b) && b[i+1] == '/' {
				if j := bytes.IndexByte(b[i:], '\n'); j >= 0 {
					i += j
				} else {
					i = len(b)
				}
			} else if i+1 < len(b) && b[i+1] == '*' {
				if j := bytes.Index(b[i+2:], []byte("*/")); j >= 0 {
					i += 2 + j + 1
				} else {
					i = len(b)
				}
			}
		case '[', '{':
			depth++
			if depth > limit {
				return i
			}
		case ']', '}':
			depth--
		}
	}
	return -1
}

// fatalError is a problem that stops decoding; offset is into the walked
// buffer (-1 when it has no place).
type fatalError struct {
	kind   ErrorKind
	offset int64
	msg    string
}

// errors places f in buf (shift: the bytes stripped before buf, on line 1)
// and returns it as Decode's one fatal error.
func (f *fatalError) errors(buf []byte, shift int) []*Error {
	if f.offset < 0 {
		return fatal(f.kind, 0, 0, f.msg)
	}
	off := int(min(f.offset, int64(len(buf))))
	l, c := lineColumn(buf, off)
	if l == 1 {
		c += shift
	}
	return fatal(f.kind, l, c, f.msg)
}

// fatal returns the one error of a failed Decode, at pointer "" and, when
// line > 0, at line:column.
func fatal(kind ErrorKind, line, column int, msg string) []*Error {
	return []*Error{{Kind: kind, Line: line, Column: column, Message: msg}}
}

// lineColumn returns the 1-based line and byte column of offset n in b.
func lineColumn(b []byte, n int) (line, column int) {
	line = 1 + bytes.Count(b[:n], []byte("\n"))
	column = 1 + n - (bytes.LastIndexByte(b[:n], '\n') + 1)
	return line, column
}

func firstInvalidUTF8(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			return i
		}
		i += n
	}
	return 0
}

// walker builds the Node tree from a jsontext token stream.
type walker struct {
	dec *jsontext.Decoder
	src []byte
	// str is one string copy of src: names and string values without
	// escapes are substrings of it instead of one allocation each.
	str     string
	errs    []*Error
	scratch []byte
	// nodes is a slab the Nodes are carved from (one allocation per
	// nodeSlab values instead of one per value).
	nodes []Node
	// members is a stack of the objects being read; each object's
	// members are copied out once, at their final length.
	members []Member
	// ptrs holds the text of every JSON Pointer of the walk, one after
	// the other: each Node.Pointer is a substring of it (one growing
	// buffer instead of one allocation per value). A strings.Builder
	// never changes bytes it has written, so the substrings stay valid
	// while it grows.
	ptrs strings.Builder
}

// pointer returns Pointer(parent, token), its text kept in w.ptrs.
func (w *walker) pointer(parent, token string) string {
	start := w.ptrs.Len()
	w.ptrs.WriteString(parent)
	w.ptrs.WriteByte('/')
	w.ptrs.WriteString(escapeToken(token))
	return w.ptrs.String()[start:]
}

// index returns the pointer of element i of the array at parent, its
// text kept in w.ptrs.
func (w *walker) index(parent string, i int) string {
	start := w.ptrs.Len()
	w.ptrs.WriteString(parent)
	w.ptrs.WriteByte('/')
	w.ptrs.WriteString(strconv.Itoa(i))
	return w.ptrs.String()[start:]
}

const nodeSlab = 32

// newNode returns a zeroed Node from the walker's slab.
func (w *walker) newNode() *Node {
	if len(w.nodes) == cap(w.nodes) {
		w.nodes = make([]Node, 0, nodeSlab)
	}
	w.nodes = w.nodes[:len(w.nodes)+1]
	return &w.nodes[len(w.nodes)-1]
}

var decoderOptions = []jsontext.Options{
	// Duplicates are detected per object by the walker, so every one is
	// reported with its pointer instead of stopping at the first.
	jsontext.AllowDuplicateNames(true),
	// Raw UTF-8 is validated before walking; allowing "invalid UTF-8" here
	// only lets lone-surrogate escapes through, which the walker reports
	// as non-fatal Encoding problems.
	jsontext.AllowInvalidUTF8(true),
}

// pooledDecoder is a reusable jsontext.Decoder reading a bytes.Buffer: a
// new Decoder and the growth of its state stacks were a fifth of the
// allocations of a walk.
type pooledDecoder struct {
	src bytes.Buffer
	dec jsontext.Decoder
}

var pooledDecoders = sync.Pool{New: func() any { return new(pooledDecoder) }}

// getDecoder returns a pooled Decoder reading src in place (a
// *bytes.Buffer lets jsontext parse it without a copy) with opts; give it
// back with putDecoder once no Value it returned is in use.
func getDecoder(src []byte, opts ...jsontext.Options) *pooledDecoder {
	d := pooledDecoders.Get().(*pooledDecoder)
	d.src = *bytes.NewBuffer(src)
	d.dec.Reset(&d.src, opts...)
	return d
}

// putDecoder drops d's reference to its input and returns it to the pool.
func putDecoder(d *pooledDecoder) {
	d.src = bytes.Buffer{}
	d.dec.Reset(&d.src)
	pooledDecoders.Put(d)
}

func walk(src []byte) (*Node, []*Error, *fatalError) {
	// Nodes keep slices of src, never of the Decoder's buffers: the
	// Decoder goes back to the pool when the walk ends.
	pd := getDecoder(src, decoderOptions...)
	defer putDecoder(pd)
	w := &walker{dec: &pd.dec, src: src, str: string(src)}
	// Pointers are about as long as the text they point into, nesting
	// aside: one allocation for most walks.
	w.ptrs.Grow(len(src))
	switch w.dec.PeekKind() {
	case '{':
	case 0:
		_, err := w.dec.ReadToken()
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, nil, &fatalError{kind: Syntax, offset: int64(len(src)), msg: "empty input: the top level must be an object"}
		}
		return nil, nil, w.syntax(err)
	default:
		return nil, nil, &fatalError{kind: Syntax, offset: int64(len(src) - len(bytes.TrimLeft(src, " \t\r\n"))), msg: "the top level must be an object"}
	}
	root, ferr := w.value("", 1)
	if ferr != nil {
		return nil, nil, ferr
	}
	if _, err := w.dec.ReadToken(); !errors.Is(err, io.EOF) {
		if err == nil {
			return nil, nil, &fatalError{kind: Syntax, offset: w.dec.InputOffset(), msg: "unexpected data after the top-level object"}
		}
		return nil, nil, w.syntax(err)
	}
	return root, w.errs, nil
}

func (w *walker) syntax(err error) *fatalError {
	var se *jsontext.SyntacticError
	if errors.As(err, &se) {
		return &fatalError{kind: Syntax, offset: se.ByteOffset, msg: se.Err.Error()}
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return &fatalError{kind: Syntax, offset: int64(len(w.src)), msg: "unexpected end of input"}
	}
	return &fatalError{kind: Syntax, offset: w.dec.InputOffset(), msg: err.Error()}
}

// report records a non-fatal problem at ptr.
func (w *walker) report(ptr string, kind ErrorKind, msg string) {
	w.errs = append(w.errs, &Error{Kind: kind, Pointer: ptr, Message: msg})
}

// value reads the next value, which sits at ptr and nesting depth depth.
func (w *walker) value(ptr string, depth int) (*Node, *fatalError) {
	switch k := w.dec.PeekKind(); k {
	case '{', '[':
		if depth > MaxDepth {
			return nil, &fatalError{kind: Limit, offset: w.dec.InputOffset(), msg: fmt.Sprintf("nesting deeper than %d levels at %q", MaxDepth, ptr)}
		}
		if _, err := w.dec.ReadToken(); err != nil {
			return nil, w.syntax(err)
		}
		start := w.dec.InputOffset() - 1
		var n *Node
		var ferr *fatalError
		if k == '{' {
			n, ferr = w.object(ptr, depth)
		} else {
			n, ferr = w.array(ptr, depth)
		}
		if ferr != nil {
			return nil, ferr
		}
		if _, err := w.dec.ReadToken(); err != nil { // the closing delimiter
			return nil, w.syntax(err)
		}
		n.Raw = w.src[start:w.dec.InputOffset()]
		return n, nil
	default:
		v, err := w.dec.ReadValue()
		if err != nil {
			return nil, w.syntax(err)
		}
		// The Value is only valid until the next read: keep src's bytes.
		end := w.dec.InputOffset()
		start := end - int64(len(v))
		raw := w.src[start:end:end]
		n := w.newNode()
		n.Pointer, n.Raw = ptr, raw
		switch k {
		case 'n':
			n.Kind = KindNull
		case 't', 'f':
			n.Kind, n.Bool = KindBool, k == 't'
		case '0':
			n.Kind = KindNumber
			if msg := checkNumber(raw); msg != "" {
				w.report(ptr, Number, msg)
			}
		case '"':
			n.Kind = KindString
			s, msg := w.unquote(raw, start)
			n.Str = s
			if msg != "" {
				w.report(ptr, Encoding, "string value "+msg)
			}
		}
		return n, nil
	}
}

func (w *walker) object(ptr string, depth int) (*Node, *fatalError) {
	n := w.newNode()
	n.Kind, n.Pointer = KindObject, ptr
	base := len(w.members)
	for w.dec.PeekKind() == '"' {
		raw, err := w.dec.ReadValue()
		if err != nil {
			return nil, w.syntax(err)
		}
		name, msg := w.unquote(raw, w.dec.InputOffset()-int64(len(raw)))
		if msg != "" {
			w.report(ptr, Encoding, fmt.Sprintf("member name %s %s", strconv.QuoteToASCII(name), msg))
		}
		v, ferr := w.value(w.pointer(ptr, name), depth+1)
		if ferr != nil {
			return nil, ferr
		}
		w.members = append(w.members, Member{Name: name, Value: v})
	}
	if len(w.members) > base {
		n.Members = append([]Member(nil), w.members[base:]...)
		clear(w.members[base:])
		w.members = w.members[:base]
	}
	w.markDuplicates(n)
	return n, nil
}

func (w *walker) array(ptr string, depth int) (*Node, *fatalError) {
	n := w.newNode()
	n.Kind, n.Pointer = KindArray, ptr
	for {
		switch w.dec.PeekKind() {
		case ']':
			return n, nil
		case 0:
			_, err := w.dec.ReadToken()
			return nil, w.syntax(err)
		}
		v, ferr := w.value(w.index(ptr, len(n.Elems)), depth+1)
		if ferr != nil {
			return nil, ferr
		}
		n.Elems = append(n.Elems, v)
	}
}

// markDuplicates flags every member whose name occurs more than once and
// reports one DuplicateKey problem per duplicated name.
func (w *walker) markDuplicates(n *Node) {
	ms := n.Members
	if len(ms) < 2 {
		return
	}
	if len(ms) <= 16 {
		for i := range ms {
			if ms[i].Duplicate {
				continue
			}
			times := 1
			for j := i + 1; j < len(ms); j++ {
				if ms[j].Name == ms[i].Name {
					ms[j].Duplicate = true
					times++
				}
			}
			if times > 1 {
				ms[i].Duplicate = true
				w.report(Pointer(n.Pointer, ms[i].Name), DuplicateKey, fmt.Sprintf("member %q appears %d times", ms[i].Name, times))
			}
		}
		return
	}
	count := make(map[string]int, len(ms))
	for _, m := range ms {
		count[m.Name]++
	}
	reported := map[string]bool{}
	for i := range ms {
		if count[ms[i].Name] > 1 {
			ms[i].Duplicate = true
			if !reported[ms[i].Name] {
				reported[ms[i].Name] = true
				w.report(Pointer(n.Pointer, ms[i].Name), DuplicateKey, fmt.Sprintf("member %q appears %d times", ms[i].Name, count[ms[i].Name]))
			}
		}
	}
}

// unquote returns the unescaped text of the JSON string raw and, when it
// holds a lone-surrogate escape or a Unicode noncharacter, a message saying
// so (raw UTF-8 is valid here: Decode checked it first).
//
// start is raw's offset in w.src: text without escapes is a substring of
// w.str.
func (w *walker) unquote(raw []byte, start int64) (string, string) {
	body := raw[1 : len(raw)-1]
	var s string
	if bytes.IndexByte(body, '\\') < 0 {
		s = w.str[start+1 : start+int64(len(raw))-1]
	} else {
		var err error
		w.scratch, err = jsontext.AppendUnquote(w.scratch[:0], raw)
		s = string(w.scratch)
		if err != nil {
			return s, "holds a lone surrogate escape (" + err.Error() + ")"
		}
	}
	if r, ok := findNoncharacter(s); ok {
		return s, fmt.Sprintf("holds the Unicode noncharacter U+%04X", r)
	}
	return s, ""
}

// findNoncharacter returns the first Unicode noncharacter in s (U+FDD0..
// U+FDEF and the last two code points of every plane).
func findNoncharacter(s string) (rune, bool) {
	hasLead := false
	for i := 0; i < len(s); i++ {
		if s[i] >= 0xEF {
			hasLead = true
			break
		}
	}
	if !hasLead {
		return 0, false
	}
	for _, r := range s {
		if (r >= 0xFDD0 && r <= 0xFDEF) || r&0xFFFE == 0xFFFE {
			return r, true
		}
	}
	return 0, false
}

// checkNumber applies the I-JSON number rules to the JSON number token raw
// and returns why it is refused, or "".
func checkNumber(raw []byte) string {
	tok := string(raw)
	// Fast path: a plain integer of at most 15 digits is exact.
	if len(tok) <= 16 && isPlainInt(tok) {
		return ""
	}
	f, err := strconv.ParseFloat(tok, 64)
	if err != nil || math.IsInf(f, 0) {
		return fmt.Sprintf("%s overflows an IEEE-754 double", tok)
	}
	if f == 0 {
		if nonzeroMantissa(tok) {
			return fmt.Sprintf("%s underflows to 0", tok)
		}
		return "" // 0, -0, 0.0e10 …
	}
	if math.Abs(f) > maxSafeInteger {
		return fmt.Sprintf("%s is a whole value outside ±(2^53−1)", tok)
	}
	shortest := strconv.FormatFloat(f, 'g', -1, 64)
	if shortest == tok {
		return ""
	}
	want, ok1 := new(big.Rat).SetString(tok)
	got, ok2 := new(big.Rat).SetString(shortest)
	if !ok1 || !ok2 || want.Cmp(got) != 0 {
		return fmt.Sprintf("%s has more precision than a double: it would canonicalize as %s", tok, jcsNumber(f))
	}
	return ""
}

func jcsNumber(f float64) string {
	return string(jsontext.AppendFloat(nil, f, 64))
}

func isPlainInt(s string) bool {
	if s != "" && s[0] == '-' {
		s = s[1:]
	}
	if s == "" || len(s) > 15 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// nonzeroMantissa reports whether the number token has a nonzero digit
// before its exponent.
func nonzeroMantissa(tok string) bool {
	for i := 0; i < len(tok); i++ {
		switch c := tok[i]; {
		case c == 'e' || c == 'E':
			return false
		case c >= '1' && c <= '9':
			return true
		}
	}
	return false
}
